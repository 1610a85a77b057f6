"""`dlm serve` end to end: a real process serving the real SmolLM2 plus a LoRA adapter
published in the document's store, driven by the official `openai` client and httpx.

The server listens on 127.0.0.1 only; every request is bounded (timeouts, max_tokens
8) and the process is stopped (SIGINT, then kill) whatever happens.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI

from dlm.doc import load_document, new_document
from dlm.store import open_store

pytestmark = pytest.mark.integration

# `dlm serve` through the CLI entry point when the command is registered there,
# else through `register()` on a bare Typer app (the same command function).
LAUNCHER = """
import sys, typer
from dlm.cli import main as cli_main
if "serve" in {c.name or c.callback.__name__ for c in cli_main.app.registered_commands}:
    cli_main.main()
else:
    from dlm.cli import serve_cmd
    app = typer.Typer()
    app.callback()(lambda: None)
    serve_cmd.register(app)
    app()
"""


def start_serve(args: list[str], timeout: float = 180) -> tuple[subprocess.Popen[bytes], str]:
    """`dlm serve ARGS --port 0` in a process, and the URL it printed once listening."""
    cmd = [sys.executable, "-c", LAUNCHER, "serve", *args, "--host", "127.0.0.1", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ))
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        if not line:
            proc.wait(timeout=10)
            pytest.fail(f"dlm serve exited {proc.returncode}: {''.join(seen)[-2000:]}")
        seen.append(line)
        if line.startswith("serving "):
            url = line.split(" on ", 1)[1].split("/v1", 1)[0]
            assert not url.endswith(":0")  # the port the system chose, printed after binding
            wait_healthy(proc, url)
            return proc, url
    proc.kill()
    pytest.fail(f"dlm serve printed no address in {timeout} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def publish_untrained_adapter(doc_path: Path, base_path: Path) -> str:
    """A LoRA adapter (B = 0 at init, so outputs equal the base) as the store's current version."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    doc = load_document(doc_path)
    store = open_store(doc.frontmatter.dlm_id)
    staging = store.new_staging_dir("serve-test")
    model = AutoModelForCausalLM.from_pretrained(base_path)
    peft_model = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    peft_model.save_pretrained(staging)
    version, _ = store.commit_version(staging)
    return version


@pytest.fixture
def served(tmp_path: Path, smollm2_ref: Any) -> Iterator[tuple[str, Path]]:
    text = new_document(system_prompt="Answer briefly.")
    head, body = text.split("\n---\n", 1)
    frontmatter = head + "\nserve:\n  tokenizer_cache:\n    enable_l1: true\n    l1_max_memory: 1000000\n"
    doc_path = tmp_path / "notes.dlm"
    doc_path.write_text(frontmatter + "---\n" + body)
    publish_untrained_adapter(doc_path, smollm2_ref.path)
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"tokenizer_cache": {"l1_min_prompt_chars": 0, "l1_max_memory": 5}}))
    proc, url = start_serve([
        str(doc_path), "--config", str(config), "--tokenizer-cache-enable-l0",
        "--tokenizer-cache-l1-max-memory", "2000000",
    ])  # fmt: skip
    try:
        yield url, doc_path
    finally:
        stop(proc)


def test_dlm_serve_answers_openai_clients_and_plain_http(served: tuple[str, Path], smollm2_tokenizer: Any) -> None:
    url, doc_path = served
    doc = load_document(doc_path)
    client = OpenAI(base_url=url + "/v1", api_key="unused", timeout=120, max_retries=0)
    model_id = f"dlm:{doc.frontmatter.dlm_id}"
    assert [m.id for m in client.models.list().data] == [model_id, "smollm2-135m"]  # then the base alone

    messages = [{"role": "user", "content": "What is the capital of France?"}]
    reply = client.chat.completions.create(model=model_id, messages=messages, max_tokens=8)
    text = reply.choices[0].message.content
    assert text and reply.usage.completion_tokens <= 8

    stream = client.chat.completions.create(model=model_id, messages=messages, max_tokens=8, stream=True)
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert streamed == text  # greedy decoding: the same reply both ways

    with httpx.Client(base_url=url, timeout=60) as http:
        rendered = smollm2_tokenizer.apply_chat_template(
            [{"role": "system", "content": "Answer briefly."}, *messages],
            tokenize=False,
            add_generation_prompt=True,
        )
        tokens = http.post("/tokenize", json={"messages": messages}).json()
        assert tokens["tokens"] == smollm2_tokenizer.encode(rendered, add_special_tokens=False)
        assert tokens["count"] == reply.usage.prompt_tokens
        assert tokens["max_model_len"] > 0
        metrics = http.get("/metrics").text
    # the flag enabled L0 and it served the repeated prompt; the frontmatter enabled L1;
    # --config lowered the L1 threshold below this short prompt (default 256 chars),
    # and the flag's 2 MB beat --config's 5 bytes (which could hold nothing)
    assert metric(metrics, 'dlm_tokenizer_cache_hits_total{level="l0"}') >= 2
    assert metric(metrics, 'dlm_tokenizer_cache_bytes{level="l1"}') > 5
    assert metric(metrics, 'dlm_requests_total{endpoint="/v1/chat/completions",status="200"}') == 2


def metric(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{series} not in /metrics")


def test_sigterm_refuses_queued_work_cancels_in_flight_work_and_exits(tmp_path: Path, smollm2_ref: Any) -> None:
    doc_path = tmp_path / "plain.dlm"
    doc_path.write_text(new_document(system_prompt="Answer at length."))
    proc, url = start_serve([str(doc_path), "--no-adapter", "--max-queue", "1", "--shutdown-timeout", "2"])
    body = {"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 2000}
    try:
        with httpx.Client(base_url=url, timeout=60) as first, httpx.Client(base_url=url, timeout=60) as second:
            with first.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as running:
                lines = running.iter_lines()
                assert next(lines).startswith("data: ")  # generating now
                queued: list[httpx.Response] = []
                waiter = threading.Thread(target=lambda: queued.append(second.post("/v1/chat/completions", json=body)))
                waiter.start()
                time.sleep(1.0)  # the second request is waiting for the model
                proc.send_signal(signal.SIGTERM)
                started = time.monotonic()
                waiter.join(30)
                assert queued and queued[0].status_code == 503
                assert queued[0].json()["error"]["code"] == "shutting_down"
                try:
                    rest = list(lines)  # ends when the grace period cancels the generation
                except httpx.HTTPError:
                    rest = []
                assert "data: [DONE]" not in rest  # cut short, not finished: 2,000 ids take minutes
            proc.wait(timeout=30)
            assert time.monotonic() - started < 20  # 2 s grace period, then cancelled and gone
        # uvicorn re-raises the signal it caught once it has shut down: ended by SIGTERM
        assert proc.returncode == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def wait_healthy(proc: subprocess.Popen[bytes], url: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"dlm serve exited {proc.returncode}: {proc.stdout.read().decode()[-2000:]}")  # type: ignore[union-attr]
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"dlm serve did not come up in {timeout} s")
        time.sleep(0.5)


def test_ctrl_c_during_a_long_generation_exits_130_with_the_generation_stopped(
    tmp_path: Path, smollm2_ref: Any
) -> None:
    doc_path = tmp_path / "plain.dlm"
    doc_path.write_text(new_document(system_prompt="Answer at length."))
    proc, url = start_serve([str(doc_path), "--no-adapter", "--shutdown-timeout", "1"])
    body = {"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 2000, "stream": True}
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            with http.stream("POST", "/v1/chat/completions", json=body) as running:
                lines = (line for line in running.iter_lines() if line)
                assert next(lines).startswith("data: ")  # the role chunk
                assert '"content"' in next(lines)  # generating: 2,000 ids outlast the grace period
                proc.send_signal(signal.SIGINT)
                try:
                    rest = list(lines)
                except httpx.HTTPError:
                    rest = []
                assert "data: [DONE]" not in rest
        proc.wait(timeout=60)
        output = proc.stdout.read().decode()  # type: ignore[union-attr]
        assert proc.returncode == 130, output[-2000:]
        assert "terminate called" not in output, output[-1500:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
