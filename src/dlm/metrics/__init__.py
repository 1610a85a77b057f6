"""Training metrics in the store's `metrics.sqlite`."""

from dlm.metrics.db import EvalRecord, MetricsDB, RunRecord, TokenizationRecord

__all__ = ["EvalRecord", "MetricsDB", "RunRecord", "TokenizationRecord"]
