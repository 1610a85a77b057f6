"""Types of the native lister `dlm.rows._fastlist` (built from `_fastlist.c`)."""

from collections.abc import Callable, Sequence
from typing import Any

Item = tuple[int, str | None, str | None, Any]
Listing = tuple[list[Item], list[tuple[str, str]]]

def decide_dirs(
    bases: Sequence[str],
    prefixes: Sequence[str],
    threads: int,
    take_file: Callable[[str], object] | None,
    take_folder: Callable[[str], object],
    source_index: int,
    max_bytes: int,
    row_type: type[tuple[Any, ...]],
    odd: Callable[[str, int, int, str, str], Item | None],
    name_key: Callable[[Item], str],
    /,
) -> list[int | Listing]:
    """For each folder `bases[i]` (ending in `/`, relative prefix `prefixes[i]`): the
    errno of listing it, or (items, subfolders), its listing as
    `dlm.rows.listing.list_folder` makes it with each run of ROW items as one ROWS
    item, and the (path, rel_prefix) of each DIR item. `take_file` None: every file is
    taken without a call. Links and entries whose lstat failed are decided by `odd`
    (None: dropped; else a 4-tuple of kind SKIP, LINK_DIR or LINK_FILE).

    Raises:
        TypeError: `row_type` is not a tuple subclass, or `odd` returned anything else.
        MemoryError: a folder could not be listed for lack of memory.
    """
