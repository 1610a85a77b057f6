"""The teacher's replies, remembered by what they came from, and the one place that
asks the teacher over HTTP (`training.synth.teacher`; `dlm.rows.teacher` has what is
asked and how a reply becomes pairs).

Folder: `$DLM_HOME/teacher/` (`dlm.paths.teacher_dir`), apart from the section
cache, so `dlm cache clear` never drops replies that cost a model's time:

    teacher/
        fill.lock                   held while a process asks (filelock)
        <hex[:2]>/<hex>.json        one reply: {"format": 1, "key": "sha256:<hex>",
                                                "model": "<name>", "reply": "<text>"}

`<hex>` is the reply's key (`dlm.rows.teacher.reply_key`: prompt version, model,
text, pairs, temperature, max_tokens). A file is written whole through
`dlm.keyed.write_keyed` (atomic), so a reader sees a complete reply or none, and a
failed request writes nothing. A reply is stored as the endpoint sent it and parsed
on each read, so a warm cache gives the same pairs byte for byte without a request.

Who asks: `fill_teacher_cache` (what `dlm train` and `dlm synth --fetch` run) asks
for each unit without a reply, one request at a time, under `fill.lock`; a second
process waits, then finds the replies the first wrote. Everything else (row
building, `dlm show`, `dlm synth` without `--fetch`) reads the folder only
(`teacher_entries`) and never opens a connection.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm.errors import TeacherError
from dlm.keyed import read_keyed, write_keyed
from dlm.paths import teacher_dir
from dlm.rows.teacher import TeacherUnit, kept_pairs, messages, parse_reply, reply_key, teacher_units

if TYPE_CHECKING:
    import httpx

    from dlm.doc import Document
    from dlm.doc.schema import TeacherConfig
    from dlm.rows.facts.model import Pair
    from dlm.rows.types import FileRow

REPLY_FORMAT = 1
CONNECT_SECONDS = 10.0  # to open a connection to the endpoint
REPLY_SECONDS = 600.0  # for a whole reply: a CPU-served model writes slowly
WAY_OUT = "start the server, or remove training.synth.teacher from the frontmatter"


@dataclass(frozen=True)
class TeacherEntry:
    """One unit and what its remembered reply gives.

    Attributes:
        unit: the text asked about.
        key: its reply's key (`dlm.rows.teacher.reply_key`).
        reply: the remembered reply, or None when not asked yet.
        pairs: the kept pairs (`dlm.rows.teacher.kept_pairs`), () when not asked.
        dropped: pairs the reply held that were not kept (ungrounded, past `pairs`).
    """

    unit: TeacherUnit
    key: str
    reply: str | None
    pairs: tuple[Pair, ...]
    dropped: int


@dataclass(frozen=True)
class TeacherFill:
    """What `fill_teacher_cache` did: `asked` requests sent, `cached` units already answered."""

    asked: int
    cached: int


def entry_path(key: str) -> Path:
    """Where the reply under `key` (`sha256:<hex>`) lives (module docstring)."""
    hexdigest = key.split(":", 1)[1]
    return teacher_dir() / hexdigest[:2] / f"{hexdigest}.json"


def cached_reply(key: str) -> str | None:
    """The reply remembered under `key`, or None (never asked, damaged, another format)."""
    data = read_keyed(entry_path(key), REPLY_FORMAT, key)
    reply = data.get("reply") if data is not None else None
    return reply if isinstance(reply, str) else None


def teacher_entries(config: TeacherConfig, units: Sequence[TeacherUnit]) -> list[TeacherEntry]:
    """Each unit with its remembered reply and kept pairs, in `units` order; reads the
    folder only."""
    entries = []
    for unit in units:
        key = reply_key(config, unit)
        reply = cached_reply(key)
        pairs = tuple(kept_pairs(unit, reply, config.pairs)) if reply is not None else ()
        dropped = len(parse_reply(reply)) - len(pairs) if reply is not None else 0
        entries.append(TeacherEntry(unit, key, reply, pairs, dropped))
    return entries


def document_units(doc: Document, files: Sequence[FileRow] | None = None) -> list[TeacherUnit]:
    """The units of `doc` (`dlm.rows.teacher.teacher_units`), walking its sources when
    `files` is None.

    Raises:
        SourceError: a `training.sources` directive cannot be walked.
    """
    from dlm.rows.walk import walk_sources

    if files is None:
        base_dir = doc.path.parent if doc.path else Path.cwd()
        name = str(doc.path) if doc.path else "<doc>"
        files = walk_sources(doc.frontmatter.training.sources, base_dir, doc_name=name).files
    return teacher_units(doc, files)


def fill_teacher_cache(
    doc: Document,
    files: Sequence[FileRow] | None = None,
    *,
    on_ask: Callable[[TeacherUnit], None] | None = None,
) -> TeacherFill:
    """Ask the document's teacher for every unit without a remembered reply, and
    remember each reply (module docstring); nothing when `training.synth.teacher` is
    unset. `on_ask` is called before each request.

    Args:
        files: the walk's files (None: walk the document's sources).

    Raises:
        TeacherError: the endpoint cannot be reached, answers an HTTP error or not a
            chat completion, or `api_key_env` names an unset variable; one line naming
            the URL and the unit (`file:line`). Replies written before it stay, the
            failed one is not written.
        SourceError: a `training.sources` directive cannot be walked.
    """
    import httpx
    from filelock import FileLock

    config = doc.frontmatter.training.synth.teacher
    if config is None:
        return TeacherFill(0, 0)
    units = document_units(doc, files)
    missing = [u for u in units if cached_reply(reply_key(config, u)) is None]
    if not missing:
        return TeacherFill(0, len(units))
    teacher_dir().mkdir(parents=True, exist_ok=True)
    headers = _headers(config)
    asked = 0
    timeout = httpx.Timeout(REPLY_SECONDS, connect=CONNECT_SECONDS)
    with FileLock(str(teacher_dir() / "fill.lock")), httpx.Client(timeout=timeout, headers=headers) as client:
        for unit in missing:
            key = reply_key(config, unit)
            if cached_reply(key) is not None:  # another process asked while this one waited
                continue
            if on_ask is not None:
                on_ask(unit)
            reply = ask_teacher(client, config, unit)
            write_keyed(entry_path(key), REPLY_FORMAT, key, {"model": config.model, "reply": reply})
            asked += 1
    return TeacherFill(asked, len(units) - asked)


def _headers(config: TeacherConfig) -> dict[str, str]:
    if config.api_key_env is None:
        return {}
    key = os.environ.get(config.api_key_env)
    if not key:
        raise TeacherError(
            f"training.synth.teacher.api_key_env: ${config.api_key_env} is not set; "
            f"export it with the endpoint's key, or remove api_key_env"
        )
    return {"Authorization": f"Bearer {key}"}


def ask_teacher(client: httpx.Client, config: TeacherConfig, unit: TeacherUnit) -> str:
    """One chat completion asking `config.pairs` pairs about `unit`: the reply's text.

    Raises:
        TeacherError: unreachable, an HTTP error status, or a body that is not a chat
            completion; one line naming `config.url` and `unit.where`.
    """
    import httpx

    url = f"{config.url}/chat/completions"
    body = {
        "model": config.model,
        "messages": messages(config, unit),
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
        "stream": False,
    }
    try:
        response = client.post(url, json=body)
    except httpx.HTTPError as exc:
        reason = _one_line(f"{type(exc).__name__}: {exc}")
        raise TeacherError(f"{config.url}: cannot ask the teacher about {unit.where} ({reason}); {WAY_OUT}") from None
    if response.status_code != 200:
        raise TeacherError(
            f"{config.url}: the teacher answered HTTP {response.status_code} for {unit.where} "
            f"({_one_line(response.text)[:200]}); check training.synth.teacher.model and url, or {WAY_OUT}"
        )
    content = _content(response)
    if content is None:
        raise TeacherError(
            f"{config.url}: the reply about {unit.where} is not an OpenAI chat completion "
            f"({_one_line(response.text)[:200]}); point training.synth.teacher.url at an OpenAI-compatible /v1"
        )
    return content


def _content(response: httpx.Response) -> str | None:
    """`choices[0].message.content` of a chat completion body, or None."""
    try:
        data: Any = response.json()
        content = data["choices"][0]["message"]["content"]
    except (ValueError, LookupError, TypeError):
        return None
    return content if isinstance(content, str) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())
