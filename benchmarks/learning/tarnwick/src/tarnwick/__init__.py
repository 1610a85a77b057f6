"""Tarnwick: a small feed harvester. It polls RSS and Atom feeds on a fixed round and
keeps the new entries in a Larder."""

from tarnwick.harvest import Harvester
from tarnwick.larder import Larder

__all__ = ["Harvester", "Larder"]
