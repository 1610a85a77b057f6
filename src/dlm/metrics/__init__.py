"""Training metrics in the store's `metrics.sqlite`."""

from dlm.metrics.db import MetricsDB, RunRecord, TokenizationRecord

__all__ = ["MetricsDB", "RunRecord", "TokenizationRecord"]
