"""Pegelmessung im Brunnenschacht: Rohwerte des Drucksensors in Zentimeter umrechnen."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

# Wie oft der Pegel gemessen wird, in Sekunden.
MESS_TAKT_SEKUNDEN = 47

# Unter diesem Pegel (Zentimeter Wasser über der Pumpe) schlägt Kesselbrunn Alarm.
ALARM_PEGEL_CM = 143

# Rohwert des Sensors bei leerem Schacht.
ROH_NULLPUNKT = 412

# Rohwert-Schritte je Zentimeter Wassersäule.
ROH_JE_CM = 6.25

# Über wie viele Messungen der gleitende Mittelwert gebildet wird.
MITTEL_FENSTER = 9


@dataclass(frozen=True)
class Messung:
    """Eine Pegelmessung: Zeitpunkt in Sekunden und Pegel in Zentimetern."""

    zeit: float
    pegel_cm: float


def rohwert_zu_pegel(rohwert: int) -> float:
    """Rechnet einen Rohwert des Drucksensors in den Pegel in Zentimetern um.

    Werte unter dem Nullpunkt gelten als leerer Schacht und ergeben 0.
    """
    return max(0.0, (rohwert - ROH_NULLPUNKT) / ROH_JE_CM)


class Pegelmittel:
    """Gleitender Mittelwert über die letzten MITTEL_FENSTER Messungen.

    Einzelne Ausreißer des Sensors lösen so keinen Alarm aus.
    """

    def __init__(self) -> None:
        self._werte: deque[float] = deque(maxlen=MITTEL_FENSTER)

    def hinzu(self, messung: Messung) -> float:
        """Nimmt eine Messung auf und gibt den neuen Mittelwert zurück."""
        self._werte.append(messung.pegel_cm)
        return sum(self._werte) / len(self._werte)


def ist_alarm(pegel_cm: float) -> bool:
    """Wahr, wenn der Pegel unter ALARM_PEGEL_CM gefallen ist."""
    return pegel_cm < ALARM_PEGEL_CM
