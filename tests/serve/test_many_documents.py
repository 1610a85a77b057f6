"""`dlm serve A.dlm B.dlm`: one base model, each document's adapter picked by `model`.

Two documents get LoRA adapters of different random weights (so their greedy
replies differ), published in their stores as `dlm train` publishes them. A real
`dlm serve` process on both is asked by the official `openai` client, interleaved
and concurrently, and every reply must equal, in text, finish reason and usage,
Hugging Face `generate` with that adapter alone (or the base model alone, by its
name). Then a new version of one adapter is published and served without restart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch
from openai import OpenAI
from test_serve_e2e import start_serve, stop

from dlm.doc import load_document, new_document
from dlm.serve.catalog import Catalog, ServedModel
from dlm.store import open_store

pytestmark = pytest.mark.integration

QUESTION = "Name a colour."
MAX_TOKENS = 6


def write_doc(folder: Path, name: str, system_prompt: str) -> tuple[Path, str]:
    path = folder / f"{name}.dlm"
    path.write_text(new_document(system_prompt=system_prompt))
    return path, load_document(path).frontmatter.dlm_id


def publish_random_adapter(base_path: Path, dlm_id: str, seed: int) -> Path:
    """A LoRA adapter with random (non-zero) A and B, published as the store's next version."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base_path)
    config = LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(model, config)
    store = open_store(dlm_id)
    staging = store.new_staging_dir(f"test-{seed}")
    peft_model.save_pretrained(staging)
    _, folder = store.commit_version(staging)
    return folder


class Reference:
    """Hugging Face `generate` (greedy) with one adapter, or the base model alone."""

    def __init__(self, base_path: Path, tokenizer: Any):
        from transformers import AutoModelForCausalLM

        self.tokenizer = tokenizer
        self.base = AutoModelForCausalLM.from_pretrained(base_path).eval()
        self.model: Any = None

    def add(self, folder: Path, name: str) -> None:
        from peft import PeftModel

        if self.model is None:
            self.model = PeftModel.from_pretrained(self.base, str(folder), adapter_name=name).eval()
        else:
            self.model.load_adapter(str(folder), adapter_name=name)

    def reply(self, adapter: str | None, system_prompt: str | None) -> tuple[str, str, int, int]:
        """(text, finish_reason, prompt_tokens, completion_tokens) of the greedy reply."""
        messages = [{"role": "user", "content": QUESTION}]
        if system_prompt:
            messages.insert(0, {"role": "system", "content": system_prompt})
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = torch.tensor([self.tokenizer.encode(text, add_special_tokens=False)])
        kwargs = dict(max_new_tokens=MAX_TOKENS, do_sample=False, temperature=None, top_p=None, top_k=None,
                      pad_token_id=self.tokenizer.eos_token_id)  # fmt: skip
        with torch.inference_mode():
            if adapter is None:
                with self.model.disable_adapter():
                    out = self.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
            else:
                self.model.set_adapter(adapter)
                out = self.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        new = out[0, ids.shape[1] :].tolist()
        ended = self.tokenizer.eos_token_id in new
        return (
            self.tokenizer.decode(new, skip_special_tokens=True),
            "stop" if ended else "length",
            ids.shape[1],
            len(new),
        )


def ask(client: OpenAI, model: str) -> tuple[str, str, int, int]:
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": QUESTION}], max_tokens=MAX_TOKENS
    )
    usage = reply.usage
    return (
        reply.choices[0].message.content or "",
        reply.choices[0].finish_reason,
        usage.prompt_tokens,
        usage.completion_tokens,
    )


@pytest.fixture
def two_documents(tmp_path: Path, smollm2_ref: Any) -> Iterator[dict[str, Any]]:
    a_path, a_id = write_doc(tmp_path, "alpha", "You answer as Alpha.")
    b_path, b_id = write_doc(tmp_path, "beta", "You answer as Beta.")
    folders = {"a1": publish_random_adapter(smollm2_ref.path, a_id, 1),
               "b1": publish_random_adapter(smollm2_ref.path, b_id, 2)}  # fmt: skip
    proc, url = start_serve([str(a_path), str(b_path), "--reload-interval", "0.2"])
    try:
        yield {"url": url, "a": (a_path, a_id), "b": (b_path, b_id), "folders": folders}
    finally:
        stop(proc)


def test_each_document_answers_by_model_interleaved_and_concurrent_and_reloads(
    two_documents: dict[str, Any], smollm2_ref: Any, smollm2_tokenizer: Any
) -> None:
    url = two_documents["url"]
    (_, a_id), (_, b_id) = two_documents["a"], two_documents["b"]
    client = OpenAI(base_url=url + "/v1", api_key="unused", timeout=120, max_retries=0)
    cards = {m.id: m for m in client.models.list().data}
    assert set(cards) == {f"dlm:{a_id}", f"dlm:{b_id}", "smollm2-135m"}
    assert cards[f"dlm:{a_id}"].model_extra["adapter_version"] == "v0001"  # type: ignore[index]
    assert cards[f"dlm:{a_id}"].model_extra["name"] == "alpha"  # type: ignore[index]

    ref = Reference(smollm2_ref.path, smollm2_tokenizer)
    ref.add(two_documents["folders"]["a1"], "a1")
    ref.add(two_documents["folders"]["b1"], "b1")
    want = {
        "alpha": ref.reply("a1", "You answer as Alpha."),
        f"dlm:{b_id}": ref.reply("b1", "You answer as Beta."),
        "smollm2-135m": ref.reply(None, None),
    }
    assert len({w[0] for w in want.values()}) == 3  # the adapters really differ

    order = ["alpha", f"dlm:{b_id}", "smollm2-135m", "alpha"]
    assert [ask(client, m) for m in order] == [want[m] for m in order]  # interleaved
    mixed = [*order, f"dlm:{b_id}", "smollm2-135m"]
    with ThreadPoolExecutor(max_workers=6) as pool:  # concurrent
        assert list(pool.map(lambda m: ask(client, m), mixed)) == [want[m] for m in mixed]
    assert ask(client, a_id) == want["alpha"]  # the bare dlm_id names the document too

    new_folder = publish_random_adapter(smollm2_ref.path, a_id, 3)  # as `dlm train` publishes v0002
    ref.add(new_folder, "a2")
    want_new = ref.reply("a2", "You answer as Alpha.")
    assert want_new[0] != want["alpha"][0]
    deadline = time.monotonic() + 60
    while client.models.retrieve(f"dlm:{a_id}").model_extra["adapter_version"] != "v0002":  # type: ignore[index]
        assert time.monotonic() < deadline, "the new adapter version was never served"
        time.sleep(0.1)
    assert ask(client, "alpha") == want_new
    assert ask(client, f"dlm:{b_id}") == want[f"dlm:{b_id}"]  # the other document is untouched


def test_the_catalog_resolves_ids_names_and_dlm_ids() -> None:
    a = ServedModel("dlm:01A", adapter="dA", name="alpha", dlm_id="01A", adapter_version="v0001", base="base")
    base = ServedModel("base", base="base")
    catalog = Catalog([a, base])
    assert catalog.resolve(None) is a
    assert catalog.resolve("alpha") is a and catalog.resolve("01A") is a and catalog.resolve("dlm:01A") is a
    assert catalog.resolve("base") is base and catalog.resolve("gamma") is None
    assert catalog.get("dlm:01A").card(2048)["parent"] == "base"
    with pytest.raises(ValueError, match="two served models answer to 'alpha'"):
        Catalog([a, ServedModel("dlm:01B", name="alpha", dlm_id="01B")])
