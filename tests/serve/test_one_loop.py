"""`dlm prompt` and `dlm serve` decode through one loop: on the same document, adapter
and question, greedy replies are equal in text, token count and finish reason (the
real SmolLM2 with a published LoRA adapter of random weights; the server built by
`dlm serve`'s own action and driven by the official `openai` client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI
from test_many_documents import publish_random_adapter, write_doc

from dlm.actions.prompting import prompt
from dlm.actions.serving import ServeOptions, build_app
from dlm.serve.server import RunningServer

pytestmark = pytest.mark.integration

QUESTION = "Name three colours of the sea."


def test_prompt_and_serve_give_the_same_greedy_reply_and_counts(tmp_path: Path, smollm2_ref: Any) -> None:
    path, dlm_id = write_doc(tmp_path, "notes", "Answer briefly.")
    publish_random_adapter(smollm2_ref.path, dlm_id, 7)
    built = build_app(ServeOptions(paths=[path], reload_interval=0))
    with RunningServer(built.served) as server:
        client = OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=120, max_retries=0)
        for model, use_adapter, budget in ((f"dlm:{dlm_id}", True, 10), ("smollm2-135m", False, 16)):
            reply = prompt(path, QUESTION, max_new_tokens=budget, use_adapter=use_adapter)
            text = "".join(reply)
            messages = [{"role": "user", "content": QUESTION}]
            if not use_adapter:  # the base model's name carries no document's system prompt
                messages.insert(0, {"role": "system", "content": "Answer briefly."})
            served = client.chat.completions.create(model=model, messages=messages, max_tokens=budget)
            assert served.choices[0].message.content == text
            assert served.usage.completion_tokens == reply.completion_tokens
            assert served.choices[0].finish_reason == reply.finish_reason
