---
dlm_id: 01MAK7S3BRN4QW8XD2HEZT6FGP
dlm_version: 1
base_model: smollm2-135m
system_prompt: Du beantwortest Fragen zu Kesselbrunn, der Python-Software, die einen Solebrunnen überwacht und die Beckenventile steuert.
training:
  sources:
    - path: src
      include: ["kesselbrunn/*.py", "README.md", "*.yaml"]
---

# Kesselbrunn

Kesselbrunn ist eine kleine Python-Software, die den Solebrunnen eines Kurbads
überwacht und die Zulaufventile zu den Becken steuert. Sie entstand nach einem kalten
Februar, in dem der alte Schaltschrank im Brunnenhaus von Ebersmoosach die Pumpe zweimal
trocken laufen ließ. Bis dahin hatte ein Brunnenwärter den Wasserstand jeden Morgen mit
einem Senklot von Hand gemessen. Die erste Fassung lief auf einem ausgedienten
Kassenrechner aus dem Kiosk des Bads.

# Die Leute

Geschrieben hat Kesselbrunn die Brunnenmeisterin Walburga Trinkl, die vorher nur
Tabellen für die Abrechnung programmiert hatte. Ihr Neffe Korbinian Aschauer hat den
Drucksensor in den Schacht gehängt und die Leitungen zum Schaltschrank gezogen. Seit
Walburga Trinkl im Ruhestand ist, pflegt der Bademeister Eustachius Pfeffinger den Code
und sieht jeden Montag die Schaltprotokolle durch.

# Verhalten

Kesselbrunn liest den Drucksensor in festem Takt und bildet einen gleitenden Mittelwert,
damit einzelne Ausreißer keinen Alarm auslösen. Fällt der Mittelwert unter die
Alarmgrenze, schließt das `Schieberwerk` alle Ventile auf einmal. Ein Ventil, das zu
lange offen steht, wird bei der nächsten Messung von selbst zugemacht. Jede Schaltung
landet mit Uhrzeit im Protokoll des jeweiligen Tages.

::instruction::

### Q
Wo ist die Klasse Schieberwerk definiert?

### A
In `kesselbrunn/ventil.py`.

### Q
Wie lange darf ein Ventil höchstens offen bleiben?

### A
617 Sekunden (`MAX_OFFEN_SEKUNDEN`).

### Q
Welche Funktion rechnet einen Rohwert des Drucksensors in Zentimeter um?

### A
`rohwert_zu_pegel` in `kesselbrunn/pegel.py`.

### Q
Ab welchem Pegel schlägt Kesselbrunn Alarm?

### A
Unter 143 Zentimetern (`ALARM_PEGEL_CM`).

### Q
Wie starte ich die Überwachung des Brunnens?

### A
Mit `kesselbrunn wache`.

### Q
Wie oft misst Kesselbrunn den Pegel?

### A
Alle 47 Sekunden (`MESS_TAKT_SEKUNDEN`).

### Q
Welche Methode schließt alle Ventile auf einmal?

### A
`Schieberwerk.alle_schliessen()`.

### Q
Welche Dateiendung haben die Schaltprotokolle?

### A
`.kbprot`

::probe::

### Q
In welcher Datei steht der Code des Schieberwerks?

### A
`kesselbrunn/ventil.py`

### Keys
- ventil.py

### Q
Nach wie vielen Sekunden wird ein offenes Zulaufventil spätestens zugemacht?

### A
Nach 617 Sekunden.

### Keys
- 617

### Q
Mit welcher Funktion wird aus dem Messwert des Sensors die Wasserhöhe berechnet?

### A
`rohwert_zu_pegel`

### Keys
- rohwert_zu_pegel

### Q
Bei wie vielen Zentimetern Wasserstand im Schacht wird Alarm gegeben?

### A
Unter 143 Zentimetern.

### Keys
- 143

### Q
Welcher Befehl setzt die laufende Brunnenüberwachung in Gang?

### A
`kesselbrunn wache`

### Keys
- kesselbrunn wache

### Q
In welchem zeitlichen Abstand wird der Wasserstand abgelesen?

### A
Alle 47 Sekunden.

### Keys
- 47

### Q
Wie heißt die Methode, die sämtliche Zuläufe gleichzeitig zudreht?

### A
`Schieberwerk.alle_schliessen()`

### Keys
- alle_schliessen

### Q
Worauf enden die Namen der täglichen Protokolldateien?

### A
Auf `.kbprot`.

### Keys
- kbprot

### Q
In welchem Ort steht das Brunnenhaus, für das Kesselbrunn geschrieben wurde?

### A
In Ebersmoosach.

### Keys
- Ebersmoosach

### Q
In welchem Ordner legt Kesselbrunn zusätzlich seine Störmeldungen ab?

### A
`/var/spool/kesselbrunn/stoerkasten`

### Keys
- stoerkasten

### Q
Wie viele Liter pro Minute kann die Brunnenpumpe höchstens fördern?

### A
386 Liter pro Minute (`MAX_FOERDERMENGE_L_MIN`).

### Keys
- 386

### Q
Um wie viel Prozent wird die Förderung im Nachtbetrieb gedrosselt?

### A
Um 63 Prozent (`drossel_prozent` unter `nachtbetrieb`).

### Keys
- 63
