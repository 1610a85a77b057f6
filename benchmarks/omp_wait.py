"""Two torch processes on the same cores: OpenMP's spin-wait against `OMP_WAIT_POLICY=PASSIVE`.

Each process runs the same CPU work (LoRA-sized linear layers: `x [512, 576] @ W [576, 576]`
and a ReLU, `--rounds` x 30 times) with torch's default thread count (one per core).
Measured: the work alone, then two copies started together, once with the default
wait policy (GNU OpenMP spins for a while before it sleeps) and once with
`OMP_WAIT_POLICY=PASSIVE` (idle threads sleep at once). Two processes that share the
cores should each take about twice the time of one; spinning threads take cycles from
the other process's working threads, so they take longer. Prints seconds and the ratios.

    python benchmarks/omp_wait.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

WORK = """
import sys, time, torch
torch.manual_seed(0)
w, x = torch.randn(576, 576), torch.randn(512, 576)
t = time.perf_counter()
for _ in range(int(sys.argv[1]) * 30):
    torch.relu(torch.nn.functional.linear(x, w))
print(time.perf_counter() - t)
"""


def run(copies: int, rounds: int, passive: bool) -> list[float]:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    procs = [
        subprocess.Popen([sys.executable, "-c", WORK, str(rounds)], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(copies)
    ]
    return [float(p.communicate()[0]) for p in procs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    start = time.perf_counter()
    alone = run(1, args.rounds, passive=False)[0]
    alone_passive = run(1, args.rounds, passive=True)[0]
    pair = max(run(2, args.rounds, passive=False))
    pair_passive = max(run(2, args.rounds, passive=True))
    print(f"cores: {len(os.sched_getaffinity(0))}")
    print(f"one process, default wait policy:   {alone:7.2f} s")
    print(f"one process, PASSIVE:               {alone_passive:7.2f} s  ({alone_passive / alone:.2f}x the default)")
    print(f"two at once, default (slower one):  {pair:7.2f} s  ({pair / alone:.2f}x one alone)")
    print(f"two at once, PASSIVE (slower one):  {pair_passive:7.2f} s  ({pair_passive / alone_passive:.2f}x one alone)")
    print(f"two at once, default / PASSIVE:     {pair / pair_passive:.2f}x")
    print(f"({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
