"""The `ostwick` command."""

import argparse


def main() -> None:
    """Parse the command line and print the timetables of one season."""
    parser = argparse.ArgumentParser(prog="ostwick")
    parser.add_argument("command", choices=["print", "check"])
    parser.add_argument("--season", default="winter")
    parser.add_argument("--large-print", action="store_true")
    parser.parse_args()
