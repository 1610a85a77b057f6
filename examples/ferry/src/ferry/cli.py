"""The `ferry` command."""

import argparse


def main(argv=None):
    """`ferry sail` starts the deckhands; `ferry dock` lists the waiting tasks."""
    parser = argparse.ArgumentParser(prog="ferry")
    parser.add_argument("command", choices=["sail", "dock"])
    return parser.parse_args(argv)
