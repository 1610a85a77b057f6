"""The `TrainReport` a run ends with: what was trained, on what, at what cost, and the
report's evaluation; one builder for rank 0 (which names the adapter) and its peers."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from dlm.actions.training.plan import PreparedRun
from dlm.actions.training.types import TrainReport
from dlm.metrics import TokenizationRecord
from dlm.tokenize.seam import TokenizedRows
from dlm.train.lora import LoraResult, peak_rss_bytes


def build_report(
    run: PreparedRun,
    result: LoraResult,
    *,
    version: str = "",
    adapter_dir: str = "",
    sha: str = "",
    warnings: list[str] | None = None,
    heldout: dict[str, Any] | None = None,
    evaluation: dict[str, Any] | None = None,
) -> TrainReport:
    """The one `TrainReport` of a run: rank 0's names the adapter, a peer's leaves it empty."""
    return TrainReport(
        run_id=run.run_id,
        dlm_id=run.doc.frontmatter.dlm_id,
        adapter_version=version,
        adapter_dir=adapter_dir,
        adapter_sha256=sha,
        base_model=run.ref.name,
        base_model_revision=run.ref.revision,
        steps=result.steps,
        train_loss=result.train_loss,
        train_tokens=result.tokens_seen,
        tokens_per_second=result.tokens_per_second,
        train_seconds=result.seconds,
        step_seconds=round(result.step_seconds, 3),
        accelerator_peak_bytes=result.accelerator_peak_bytes,
        peak_rss_bytes=peak_rss_bytes(),
        rows=_row_counts(run.tokenized),
        files_taken=run.tokenized.files_taken,
        files_skipped=run.files_skipped,
        lossy_files=run.tokenized.lossy_files,
        examples=len(run.dataset),
        tokenization=asdict(tokenization_record(run.tokenized)),
        warnings=warnings or [],
        heldout=heldout,
        real_token_fraction=result.real_token_fraction,
        padding_fraction=result.padding_fraction,
        distributed=_distributed_summary(run),
        rank=run.rank,
        evaluation=evaluation,
        loss_tokens=result.loss_tokens,
        precision=run.hyper.precision,
    )


def _row_counts(tokenized: TokenizedRows) -> dict[str, int]:
    """Rows per kind (`prose`, `instruction`, `source`, `synth`, `replay`)."""
    counts: dict[str, int] = {"prose": 0, "instruction": 0, "source": 0, "synth": 0, "replay": 0}
    for kind in tokenized.kinds:
        counts[kind] += 1
    return counts


def tokenization_record(tokenized: TokenizedRows) -> TokenizationRecord:
    """What tokenizing the run's rows cost: rows, cache hits and misses, seconds, and the
    cache's size after (bytes), as the metrics database records it."""
    stats = tokenized.stats
    return TokenizationRecord(
        stats.total_rows, stats.cache_hits, stats.cache_misses, stats.seconds, stats.cache_bytes_after
    )


def _distributed_summary(run: PreparedRun) -> dict[str, Any] | None:
    """The plan and each rank's tokenization (None for one process)."""
    if run.plan.world_size == 1:
        return None
    return {
        "world_size": run.plan.world_size,
        "per_device_batch_size": run.plan.per_device_batch_size,
        "gradient_accumulation_steps": run.plan.gradient_accumulation_steps,
        "backend": run.plan.backend,
        "ranks": run.ranks,
    }
