"""Paper timetables for the Fennick Valley Bus Cooperative."""

__version__ = "2.4.1"
