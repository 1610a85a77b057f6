"""Read and write `metrics.sqlite` (schema: `dlm.metrics.migrations`).

One row in `runs` per `dlm train` (status `running`, then `completed`, `interrupted`
or `failed`), one row in `steps` per logged optimizer step, one row in
`tokenization` per run, one row in `evals` per held-out loss measurement (`phase`
`before` at step 0, `step` every `training.eval.every_steps`, `after` at the last step),
one row in `kind_losses` per logged step and row kind (train loss per kind); `runs.checkpoint`
names an interrupted run's latest checkpoint. Opened in WAL mode so `dlm metrics` can read while a run writes.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dlm.metrics.migrations import migrate


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class TokenizationRecord:
    """Tokenize phase of one run. Seconds are wall-clock; bytes on disk."""

    total_sections: int
    cache_hits: int
    cache_misses: int
    total_tokenize_seconds: float
    cache_bytes_after: int | None


@dataclass(frozen=True)
class RunRecord:
    """Summary of a finished (or interrupted) run."""

    status: str
    steps: int
    train_loss: float | None
    tokens_per_second: float | None
    adapter_version: str | None
    train_tokens: int | None = None
    real_token_fraction: float | None = None


@dataclass(frozen=True)
class EvalRecord:
    """One held-out loss measurement. `loss` and `instruction_loss` (answer tokens of
    held-out Q/A pairs only, None without any) in nats per loss token; `tokens` scored."""

    phase: str
    step: int
    loss: float
    perplexity: float
    rows: int
    tokens: int
    loss_tokens: int
    instruction_loss: float | None = None


class MetricsDB:
    """A connection to one store's metrics database, migrated on open."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        migrate(self.db)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> MetricsDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_run(
        self,
        run_id: str,
        *,
        base_model: str,
        max_steps: int | None,
        rows: int,
        files_taken: int,
        files_skipped: dict[str, int],
        heldout_rows: int = 0,
    ) -> None:
        with self.db:
            self.db.execute(
                "INSERT INTO runs (run_id, started_at, status, base_model, max_steps, rows, "
                "files_taken, files_skipped, heldout_rows) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    _now(),
                    base_model,
                    max_steps,
                    rows,
                    files_taken,
                    json.dumps(dict(sorted(files_skipped.items()))),
                    heldout_rows,
                ),
            )

    def log_eval(self, run_id: str, record: EvalRecord) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO evals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    record.phase,
                    record.step,
                    record.loss,
                    record.perplexity,
                    record.rows,
                    record.tokens,
                    record.loss_tokens,
                    record.instruction_loss,
                ),
            )

    def log_judgement(
        self, *, run_id: str | None, adapter_version: str | None, phase: str, step: int | None, summary: dict[str, Any]
    ) -> None:
        """One evaluation (`m005_judgements`); `summary` is stored as sorted-key JSON."""
        with self.db:
            self.db.execute(
                "INSERT INTO judgements (run_id, adapter_version, phase, step, created_at, summary) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, adapter_version, phase, step, _now(), json.dumps(summary, sort_keys=True)),
            )

    def judgements(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Evaluations, oldest first (of one run when `run_id` is given), summaries decoded."""
        query = "SELECT run_id, adapter_version, phase, step, created_at, summary FROM judgements"
        rows = self.db.execute(
            query + (" WHERE run_id=? ORDER BY id" if run_id else " ORDER BY id"), (run_id,) if run_id else ()
        ).fetchall()
        return [
            {
                "run_id": r[0],
                "adapter_version": r[1],
                "phase": r[2],
                "step": r[3],
                "created_at": r[4],
                "summary": json.loads(r[5]),
            }
            for r in rows
        ]

    def log_step(
        self,
        run_id: str,
        step: int,
        *,
        loss: float | None,
        learning_rate: float | None,
        tokens_seen: int | None,
        seconds: float,
    ) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, step, loss, learning_rate, tokens_seen, seconds),
            )

    def log_tokenization(self, run_id: str, record: TokenizationRecord) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO tokenization VALUES (?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    record.total_sections,
                    record.cache_hits,
                    record.cache_misses,
                    record.total_tokenize_seconds,
                    record.cache_bytes_after,
                ),
            )

    def resume_run(self, run_id: str) -> None:
        """Mark interrupted run `run_id` running again (`dlm train --resume`); its logged
        steps stay and the resumed steps replace any logged after its checkpoint."""
        with self.db:
            self.db.execute("UPDATE runs SET status='running', finished_at=NULL WHERE run_id=?", (run_id,))

    def set_checkpoint(self, run_id: str, folder: str | None) -> None:
        """Record the folder of the run's latest complete checkpoint (None: no longer kept)."""
        with self.db:
            self.db.execute("UPDATE runs SET checkpoint=? WHERE run_id=?", (folder, run_id))

    def log_kind_losses(self, run_id: str, step: int, losses: dict[str, tuple[float, int]]) -> None:
        """Train loss per row kind over the window ending at `step`: kind -> (mean nats, tokens)."""
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO kind_losses VALUES (?, ?, ?, ?, ?)",
                [(run_id, step, kind, loss, tokens) for kind, (loss, tokens) in sorted(losses.items())],
            )

    def finish_run(self, run_id: str, record: RunRecord) -> None:
        with self.db:
            self.db.execute(
                "UPDATE runs SET finished_at=?, status=?, steps=?, train_loss=?, "
                "tokens_per_second=?, adapter_version=?, train_tokens=?, real_token_fraction=? "
                "WHERE run_id=?",
                (
                    _now(),
                    record.status,
                    record.steps,
                    record.train_loss,
                    record.tokens_per_second,
                    record.adapter_version,
                    record.train_tokens,
                    record.real_token_fraction,
                    run_id,
                ),
            )

    def runs(self) -> list[dict[str, Any]]:
        """Every run, oldest first, with its `steps_logged`, `evals` (measurement order:
        before, by step, after) and `tokenization` (None if absent)."""
        self.db.row_factory = sqlite3.Row
        try:
            runs = [dict(r) for r in self.db.execute("SELECT * FROM runs ORDER BY started_at, run_id")]
            for run in runs:
                run["files_skipped"] = json.loads(run["files_skipped"] or "{}")
                run["steps_logged"] = [
                    {k: r[k] for k in ("step", "loss", "learning_rate", "tokens_seen", "seconds")}
                    for r in self.db.execute("SELECT * FROM steps WHERE run_id=? ORDER BY step", (run["run_id"],))
                ]
                run["evals"] = [
                    {k: r[k] for k in asdict(EvalRecord("", 0, 0.0, 0.0, 0, 0, 0))}
                    for r in self.db.execute(
                        "SELECT * FROM evals WHERE run_id=? ORDER BY step, "
                        "CASE phase WHEN 'before' THEN 0 WHEN 'step' THEN 1 ELSE 2 END",
                        (run["run_id"],),
                    )
                ]
                run["probe_scores"] = [
                    {"step": r[0], "answer_logprob": json.loads(r[1]).get("answer_logprob")}
                    for r in self.db.execute(
                        "SELECT step, summary FROM judgements WHERE run_id=? AND phase='step' ORDER BY step",
                        (run["run_id"],),
                    )
                ]
                run["kind_losses"] = [
                    {k: r[k] for k in ("step", "kind", "loss", "tokens")}
                    for r in self.db.execute(
                        "SELECT * FROM kind_losses WHERE run_id=? ORDER BY step, kind", (run["run_id"],)
                    )
                ]
                tok = self.db.execute("SELECT * FROM tokenization WHERE run_id=?", (run["run_id"],)).fetchone()
                run["tokenization"] = (
                    None if tok is None else {k: tok[k] for k in asdict(TokenizationRecord(0, 0, 0, 0.0, None))}
                )
            return runs
        finally:
            self.db.row_factory = None
