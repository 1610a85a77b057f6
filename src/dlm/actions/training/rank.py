"""One rank of `dlm train --nproc N`: `python -m dlm.actions.training.rank RUN_FILE`.

The launcher (`dlm.actions.training.ranks.launch_train`) starts every rank on the run
file it wrote; the rank parses the document and opens the store once, trains its part,
and exits 0, or 1 after writing its one-line cause to the launcher's error file
(`train_document` does), or 130 on Ctrl-C. Messages go to this rank's log (stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path

from dlm.actions.training.types import NullSink
from dlm.errors import DlmError


class _LogSink(NullSink):
    """A `TrainSink` that writes steps and messages to stderr (the rank's log file)."""

    def on_train_start(self, total_steps: int) -> None:
        print(f"training {total_steps} steps", file=sys.stderr, flush=True)

    def on_step(self, step: int, loss: float | None, *_: object) -> None:
        print(f"step {step} loss {loss}", file=sys.stderr, flush=True)

    def on_message(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    on_note = on_message


def main(argv: list[str]) -> int:
    """Run one rank; returns the exit code (module docstring)."""
    from dlm.actions.common import open_document
    from dlm.actions.training import train_document
    from dlm.actions.training.ranks import read_run_file

    if len(argv) != 1:
        print("usage: python -m dlm.actions.training.rank RUN_FILE (written by dlm train --nproc N)", file=sys.stderr)
        return 2
    try:
        document, options = read_run_file(Path(argv[0]))
        doc, store = open_document(document)
        train_document(doc, options, _LogSink(), store=store)
    except DlmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
