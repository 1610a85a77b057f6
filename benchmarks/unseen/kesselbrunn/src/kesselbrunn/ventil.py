"""Die Zulaufventile zu den Becken und ihr tägliches Schaltprotokoll."""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path

# Wie lange ein Ventil höchstens offen bleiben darf, in Sekunden.
MAX_OFFEN_SEKUNDEN = 617

# Größte Fördermenge der Brunnenpumpe, in Litern pro Minute.
MAX_FOERDERMENGE_L_MIN = 386

# Endung der täglichen Schaltprotokolle.
PROTOKOLL_ENDUNG = ".kbprot"


class Schieberwerk:
    """Schaltet die Zulaufventile der Becken und schreibt jede Schaltung ins Protokoll."""

    def __init__(self, ventile: list[str], protokoll_ordner: Path) -> None:
        self.ventile = list(ventile)
        self.protokoll_ordner = protokoll_ordner
        self.offen_seit: dict[str, float] = {}

    def oeffnen(self, ventil: str) -> None:
        """Öffnet ein Ventil und merkt sich, seit wann es offen ist."""
        self.offen_seit.setdefault(ventil, time.monotonic())
        self._protokoll(f"AUF {ventil}")

    def schliessen(self, ventil: str) -> None:
        """Schließt ein Ventil; ein schon geschlossenes bleibt zu."""
        if self.offen_seit.pop(ventil, None) is not None:
            self._protokoll(f"ZU {ventil}")

    def alle_schliessen(self) -> None:
        """Schließt alle Ventile auf einmal, etwa beim Pegelalarm."""
        for ventil in list(self.offen_seit):
            self.schliessen(ventil)

    def zu_lange_offen(self) -> list[str]:
        """Schließt die Ventile, die zu lange offen stehen, und gibt ihre Namen zurück."""
        jetzt = time.monotonic()
        alt = [v for v, seit in self.offen_seit.items() if jetzt - seit > MAX_OFFEN_SEKUNDEN]
        for ventil in alt:
            self.schliessen(ventil)
        return alt

    def _protokoll(self, zeile: str) -> None:
        """Hängt eine Zeile mit Uhrzeit an das Protokoll des heutigen Tages an."""
        datei = self.protokoll_ordner / f"{date.today():%Y-%m-%d}{PROTOKOLL_ENDUNG}"
        with datei.open("a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {zeile}\n")


def foerdermenge_begrenzen(wunsch_l_min: float) -> float:
    """Begrenzt die gewünschte Fördermenge auf das, was die Pumpe schafft."""
    return min(wunsch_l_min, MAX_FOERDERMENGE_L_MIN)
