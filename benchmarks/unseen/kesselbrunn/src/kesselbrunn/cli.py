"""Die Befehlszeile: `kesselbrunn wache` überwacht den Brunnen, `kesselbrunn zustand` zeigt ihn."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from kesselbrunn.pegel import MESS_TAKT_SEKUNDEN, Messung, Pegelmittel, ist_alarm, rohwert_zu_pegel
from kesselbrunn.ventil import Schieberwerk

# Wo die Einstellungen liegen, wenn `--einstellungen` fehlt.
STANDARD_EINSTELLUNGEN = Path("/etc/kesselbrunn/kesselbrunn.yaml")


def einstellungen_laden(pfad: Path) -> dict:
    """Liest die YAML-Einstellungen und gibt sie als verschachteltes dict zurück."""
    with pfad.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


def sensor_lesen(geraet: str) -> int:
    """Liest einen Rohwert vom Drucksensor (eine Zahl je Zeile)."""
    with open(geraet, encoding="ascii") as f:
        return int(f.readline())


def wache(einstellungen: dict) -> None:
    """Misst den Pegel im festen Takt und schließt bei Alarm alle Ventile."""
    ventile = [b["ventil"] for b in einstellungen["becken"]]
    werk = Schieberwerk(ventile, Path(einstellungen["protokoll"]["ordner"]))
    mittel = Pegelmittel()
    while True:
        roh = sensor_lesen(einstellungen["schacht"]["sensor"])
        pegel = mittel.hinzu(Messung(time.time(), rohwert_zu_pegel(roh)))
        if ist_alarm(pegel):
            werk.alle_schliessen()
        werk.zu_lange_offen()
        time.sleep(MESS_TAKT_SEKUNDEN)


def main() -> None:
    """Einstieg für den Befehl `kesselbrunn`."""
    parser = argparse.ArgumentParser(prog="kesselbrunn")
    parser.add_argument("befehl", choices=["wache", "zustand"])
    parser.add_argument("--einstellungen", type=Path, default=STANDARD_EINSTELLUNGEN)
    args = parser.parse_args()
    einstellungen = einstellungen_laden(args.einstellungen)
    if args.befehl == "wache":
        wache(einstellungen)
    else:
        pegel = rohwert_zu_pegel(sensor_lesen(einstellungen["schacht"]["sensor"]))
        print(f"Pegel im Schacht: {pegel:.1f} cm")
