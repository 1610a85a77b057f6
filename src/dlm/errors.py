"""The one root of every error `dlm` raises on purpose.

The CLI boundary (`dlm.cli.reporter`) catches `DlmError`, prints its message as one
line and exits with `exit_code`: 1 for bad input or a failed operation, 2 for a usage
error. Anything else is a bug and shows a traceback with `--verbose`.

Messages follow one shape: where (`path:line:col`, a field, a file), what failed, and
the way out.
"""

from __future__ import annotations


class DlmError(Exception):
    """Root of the library's errors. `exit_code` is what the CLI exits with."""

    exit_code: int = 1


class UsageError(DlmError):
    """The command line itself is wrong (conflicting flags, a bad value): exit 2."""

    exit_code = 2


class DocError(DlmError):
    """A `.dlm` document cannot be parsed or validated.

    `str()` reads `path:line:col: message`; several problems are joined one per line.
    """


class SourceError(DlmError):
    """A `training.sources` directive cannot be honoured (missing path, escape, empty corpus)."""


class BaseModelError(DlmError):
    """The base model cannot be resolved or loaded."""


class StoreError(DlmError):
    """The per-document store is busy, missing or inconsistent."""


class TrainingError(DlmError):
    """Training could not start or finish."""


class CacheError(DlmError):
    """The tokenized-section cache cannot be used as asked."""


class LockValidationError(DlmError):
    """The determinism lock disagrees with this run in a way that must stop it."""


class CpuIsaError(DlmError):
    """`DLM_CPU_ISA` holds a value dlm does not understand (see `dlm.cpu_isa`)."""


class ServeError(DlmError):
    """`dlm serve` cannot start as configured."""


class ExportError(DlmError):
    """`dlm export` cannot write as asked: no adapter, no converter, a failed conversion."""


class ExportRefused(ExportError):
    """The adapter or its base cannot be expressed faithfully in the export format;
    raised before anything is written, naming the field and the way out."""


class TeacherError(DlmError):
    """The teacher model of `training.synth.teacher` cannot be asked (unreachable, an
    HTTP error, a reply that is not a chat completion, its key's variable unset)."""


class InstallError(DlmError):
    """A data file that ships with dlm (general probes, guard passages, replay prompts)
    is missing or damaged: the message names it; the way out is to reinstall dlm."""
