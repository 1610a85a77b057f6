"""Every export prompts the model as training did: the document's `system_prompt`
(`dlm.chat.with_system_prompt`) in the chat template of merged and peft folders and in
the Ollama SYSTEM line, or the template's own default system turn when it is unset or
empty; and Ollama is never handed a system prompt its Modelfile parser would change."""

from __future__ import annotations

import json

import pytest

from dlm.chat import with_system_prompt
from dlm.errors import ExportRefused
from dlm.export.hf_folder import write_tokenizer_files
from dlm.export.ollama import chatml_profile, modelfile_text, ollama_drops, tokenizer_render
from dlm.rows.build import render_instruction

CONVERSATIONS = [
    [{"role": "user", "content": "What is ITER_CHUNK_SIZE?"}],
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}],
    [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}],
]
PROMPTS = [
    "You answer in one sentence.",
    'Quote "this", a \\ backslash,\nnew line, tab\t, é, 😀 and {{ braces }} {% raw %}',
    "",
    None,
]


@pytest.mark.parametrize("system_prompt", PROMPTS)
def test_exported_chat_template_renders_what_training_rendered(smollm2_tokenizer, tmp_path, system_prompt):
    from transformers import AutoTokenizer

    write_tokenizer_files(smollm2_tokenizer, tmp_path, system_prompt)
    exported = AutoTokenizer.from_pretrained(tmp_path)
    for messages in CONVERSATIONS:
        for generation in (True, False):
            trained = smollm2_tokenizer.apply_chat_template(
                with_system_prompt(messages, system_prompt), tokenize=False, add_generation_prompt=generation
            )
            assert exported.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation) == trained
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["chat_template"] == (tmp_path / "chat_template.jinja").read_text()


def test_training_rows_and_the_exported_template_agree(smollm2_tokenizer, tmp_path):
    from transformers import AutoTokenizer

    system = "You answer in one sentence."
    write_tokenizer_files(smollm2_tokenizer, tmp_path, system)
    full, prompt = render_instruction(smollm2_tokenizer, system, "What is it?", "It is.")
    exported = AutoTokenizer.from_pretrained(tmp_path)
    question = [{"role": "user", "content": "What is it?"}]
    assert exported.apply_chat_template(question, tokenize=False, add_generation_prompt=True) == prompt
    assert exported.apply_chat_template(question + [{"role": "assistant", "content": "It is."}], tokenize=False) == full


def _profile(tokenizer):
    return chatml_profile(tokenizer_render(tokenizer), tokenizer.eos_token, "base")


@pytest.mark.parametrize("system_prompt", ["", None])
def test_ollama_gets_the_default_system_turn_training_rendered(smollm2_tokenizer, system_prompt):
    text = modelfile_text("base.gguf", "adapter.gguf", _profile(smollm2_tokenizer), system_prompt)
    rendered = smollm2_tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    default = rendered.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]
    assert default.startswith("You are a helpful AI assistant named SmolLM")
    assert text.splitlines()[-1] == f'SYSTEM """{default}"""'


@pytest.mark.parametrize("char", ["\u200d", "\u200f", "\u00a0", "\u00ad", "\x07", "\ufeff", "\u2028", "\ue000"])
def test_characters_ollama_drops_are_refused(smollm2_tokenizer, char):
    with pytest.raises(ExportRefused, match=f"drops 1 character.*U\\+{ord(char):04X}") as info:
        modelfile_text("base.gguf", "adapter.gguf", _profile(smollm2_tokenizer), f"Answer{char} briefly.")
    assert "\n" not in str(info.value)


def test_what_ollama_keeps_is_accepted():
    assert ollama_drops("Tabs\tnew\nlines, accents é, CJK 中文, emoji 😀, math ∑, quotes “x”.") == []
