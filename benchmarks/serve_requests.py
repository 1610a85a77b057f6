"""Request latency of `dlm serve` through its real HTTP server, with the tokenizer cache
on and off, side by side.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/serve_requests.py [--requests 15] [--system-chars 1500]

Starts one `dlm serve DOC --no-adapter` per way (each its own process, the real uvicorn
server, the base model of `$DLM_MODELS_DIR`):

- `cache`: both tokenizer cache levels on (`--tokenizer-cache-enable-l0/-l1`);
- `no cache`: both levels off (the default of `dlm serve`).

Then sends the same requests to every server, one at a time, in an order rotated
between requests (no way always goes first), and times each from send to the last byte:
`POST /v1/chat/completions` with `max_tokens: 1` (the prompt's prefill plus one
decoding step: the part of a request the tokenizer cache can shorten). Two workloads:
`chat`, the document's system prompt (`--system-chars` characters of policy text)
with a different user question per request; `conversation`, one conversation growing
turn by turn (each request the previous one plus an assistant answer and a new question).
Each server first answers 3 warm-up requests of the workload's shape, not timed.

Prints per workload and way the median latency in ms, its ratio to `cache`, and the
median of the per-request ratios (each request's latency over the `cache` server's
latency for the same request, sent moments apart). Torch runs one thread per server
(`OMP_NUM_THREADS=1`) so that the servers do not compete for cores; the load average
is printed, as other processes on the machine slow every way alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tokenizer_cache import policy_text, question  # noqa: E402

WAYS = {
    "cache": ["--tokenizer-cache-enable-l0", "--tokenizer-cache-enable-l1"],
    "no cache": [],
}

DOC = """---
dlm_id: 01JDSERVEBENCH00000000000A
dlm_version: 1
base_model: smollm2-135m
system_prompt: {system}
---

A document served by the benchmark.
"""
MODEL = "dlm:01JDSERVEBENCH00000000000A"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(port: int, body: dict) -> float:
    """Seconds from send to the last byte of the reply."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions", data=data, headers={"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as reply:
        reply.read()
    return time.perf_counter() - start


def wait_ready(port: int, proc: subprocess.Popen, deadline_s: float = 600) -> None:
    end = time.time() + deadline_s
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"server on port {port} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"server on port {port} did not start")


def workloads(n: int) -> dict[str, list[list[dict]]]:
    chat = [[{"role": "user", "content": question(i)}] for i in range(n + 3)]
    turns: list[dict] = []
    conversation = []
    for t in range(n + 3):
        turns = [*turns, {"role": "user", "content": question(300 + t)}]
        conversation.append(turns)
        turns = [*turns, {"role": "assistant", "content": f"Answer {t}: " + policy_text(80)}]
    return {"chat": chat, "conversation": conversation}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=15)
    parser.add_argument("--system-chars", type=int, default=1500)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="dlm-serve-bench-"))
    doc = home / "served.dlm"
    doc.write_text(DOC.format(system=json.dumps(policy_text(args.system_chars))))
    env = dict(os.environ, DLM_HOME=str(home), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    servers: dict[str, tuple[int, subprocess.Popen]] = {}
    try:
        for way, flags in WAYS.items():
            port = free_port()
            argv = [sys.executable, "-m", "dlm", "serve", str(doc), "--no-adapter", "--port", str(port), *flags]
            servers[way] = (port, subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for port, proc in servers.values():
            wait_ready(port, proc)
        ways = list(WAYS)
        print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
        print("| workload | way | median ms | / cache (medians) | median of per-request ratios | requests |")
        print("|---|---|---|---|---|---|")
        for name, requests in workloads(args.requests).items():
            times: dict[str, list[float]] = {way: [] for way in ways}
            for i, messages in enumerate(requests):
                body = {"model": MODEL, "messages": messages, "max_tokens": 1, "temperature": 0}
                for way in ways[i % len(ways) :] + ways[: i % len(ways)]:
                    seconds = post(servers[way][0], body)
                    if i >= 3:  # the first three warm each server up
                        times[way].append(seconds)
            base = times["cache"]
            for way in ways:
                med = statistics.median(times[way])
                paired = statistics.median(t / b for t, b in zip(times[way], base, strict=True))
                print(
                    f"| {name} | {way} | {med * 1e3:.1f} | {med / statistics.median(base):.3f}x "
                    f"| {paired:.3f}x | {len(times[way])} |",
                    flush=True,
                )
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        for _, proc in servers.values():
            proc.terminate()
        for _, proc in servers.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
