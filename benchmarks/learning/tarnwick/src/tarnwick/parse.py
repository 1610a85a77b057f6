"""Feed parsing: RSS 2.0 and Atom documents into plain entries."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

ATOM = "{http://www.w3.org/2005/Atom}"


@dataclass(frozen=True)
class Entry:
    """One feed item: a stable id, its title and its link."""

    entry_id: str
    title: str
    link: str


def read_entries(data: bytes) -> list[Entry]:
    """The entries of an RSS or Atom document, in document order."""
    root = ET.fromstring(data)
    entries = []
    for item in root.iter("item"):
        link = item.findtext("link", "")
        entries.append(Entry(item.findtext("guid", link), item.findtext("title", ""), link))
    for item in root.iter(f"{ATOM}entry"):
        node = item.find(f"{ATOM}link")
        link = node.get("href", "") if node is not None else ""
        entries.append(Entry(item.findtext(f"{ATOM}id", link), item.findtext(f"{ATOM}title", ""), link))
    return entries
