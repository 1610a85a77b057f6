"""Kesselbrunn: Überwachung des Solebrunnens und Steuerung der Beckenventile.

Die Module im Überblick:

- `pegel`: Umrechnung der Sensorwerte in Zentimeter und der Pegelalarm
- `ventil`: das `Schieberwerk`, das die Zulaufventile schaltet, und seine Protokolle
- `cli`: der Befehl `kesselbrunn`
"""

# Die Fassung dieser Software, wie sie im Schaltprotokoll-Kopf erscheint.
__version__ = "0.9.2"
