"""The `tarnwick` command: `reap` starts harvesting, `list` prints the feeds."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

from tarnwick.harvest import Feed, Harvester
from tarnwick.larder import Larder


def load_settings(path: Path) -> dict:
    """The settings file as a dict (see tarnwick.toml for the keys)."""
    with path.open("rb") as handle:
        return tomllib.load(handle)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `tarnwick` console script."""
    parser = argparse.ArgumentParser(prog="tarnwick")
    parser.add_argument("command", choices=["reap", "list"])
    parser.add_argument("--settings", type=Path, default=Path("tarnwick.toml"))
    args = parser.parse_args(argv)
    settings = load_settings(args.settings)
    feeds = [Feed(url) for url in settings["feeds"]["urls"]]
    if args.command == "list":
        for feed in feeds:
            print(feed.url)
        return
    harvester = Harvester(Larder(Path(settings["larder"]["folder"])), feeds)
    harvester.run_forever()
