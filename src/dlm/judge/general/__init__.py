"""The general-ability guard set: 41 short passages, written for dlm, of prose in
English, French, German and Spanish and of code in Python, C, JavaScript, Rust, Go and
SQL, each 80 to 200 tokens with the SmolLM2 tokenizer (README.md beside them has the
license and the rules they follow).

A document adapter should leave these texts as the base model had them: a rise of
their loss after training measures what the adapter broke outside its document. The
passages are general and factual (how rainbows form, a binary search in C), so any
base model has met their like, and no document teaches them.

Files: `passages/<id>.txt`, UTF-8, one passage each; the id is the file name without
`.txt`, prefixed by its language (`en-`, `fr-`, `de-`, `es-`, `py-`, `c-`, `js-`,
`rs-`, `go-`, `sql-`). Changing a passage changes every score measured on the set, so
passages are added or edited only with a new set version (`GENERAL_SET_VERSION`).
"""

from __future__ import annotations

from importlib import resources

GENERAL_SET_VERSION = 1
LANGUAGES = ("en", "fr", "de", "es", "py", "c", "js", "rs", "go", "sql")


def load_general_set() -> list[tuple[str, str]]:
    """Every passage of the general set as `(id, text)`, sorted by id.

    `text` is the file's content, UTF-8 decoded, with its final newline (the passages
    are scored as they are; nothing is stripped or normalized).

    Raises:
        FileNotFoundError: the package data is missing (a broken install).
    """
    folder = resources.files(__name__).joinpath("passages")
    passages = [
        (entry.name.removesuffix(".txt"), entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".txt")
    ]
    if not passages:
        raise FileNotFoundError(f"no passages in {folder}: reinstall dlm (its package data is missing)")
    return sorted(passages)
