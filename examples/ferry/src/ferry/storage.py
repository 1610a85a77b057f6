"""Where finished tasks are written."""

import json

DEFAULT_JOURNAL = "ferry.journal"
JOURNAL_ROTATE_MB = 64


class Ledger:
    """Writes each finished task to the journal file as one JSON line."""

    def __init__(self, path=DEFAULT_JOURNAL):
        self.path = path

    def record(self, task, result):
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"task": repr(task), "result": repr(result)}) + "\n")
