"""The errors `dlm export` raises on purpose (all `DlmError`: one red line, exit 1)."""

from __future__ import annotations

from dlm.errors import DlmError


class ExportError(DlmError):
    """An export cannot be written as asked: missing adapter, missing tool, failed conversion."""


class ExportRefused(ExportError):
    """The adapter or base cannot be expressed faithfully in the target format.

    Raised before anything is written; the message names the field and the way out.
    """
