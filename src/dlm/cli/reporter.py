"""The CLI's one error boundary.

Every command runs inside `reported`: a `DlmError` prints one red line on stderr and
exits with its `exit_code` (1, or 2 for usage errors); Ctrl-C exits 130 with a short
note; any other exception is a bug and shows its traceback only with `--verbose`
(or `DLM_VERBOSE=1`), else one line asking to rerun with it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from dlm.errors import DlmError

err_console = Console(stderr=True, highlight=False, soft_wrap=True)
console = Console(highlight=False, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])
_state = {"verbose": False}


def set_verbose(value: bool) -> None:
    _state["verbose"] = value or os.environ.get("DLM_VERBOSE") == "1"


def error_line(message: str) -> None:
    """Print `error: <message>` in red on stderr (each line of a multi-line message)."""
    err_console.print(f"[bold red]error:[/] {escape(message)}")


def warn_line(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}")


def note_line(message: str) -> None:
    """What a command decided or is doing, on stderr, dimmed (not a warning)."""
    err_console.print(f"[dim]{escape(message)}[/]")


def reported(fn: F) -> F:
    """Wrap a command with the error boundary (see module docstring)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except DlmError as exc:
            if _state["verbose"]:
                err_console.print_exception()
            error_line(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]: nothing was changed by the unfinished step")
            raise typer.Exit(130) from None
        except typer.Exit:
            raise
        except Exception as exc:
            if _state["verbose"]:
                raise
            error_line(f"unexpected {type(exc).__name__}: {exc} (rerun with --verbose for the traceback)")
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature
