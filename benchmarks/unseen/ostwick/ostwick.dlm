---
dlm_id: 01M8QVXNGQBX26TXJ07VWFKV48
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about Ostwick, a Python tool that prints bus timetables.
training:
  sources:
    - path: src
      include: ["ostwick/*.py", "tests/*.py", "README.rst", "docs/*.md", "pyproject.toml"]
---

# Ostwick

Ostwick prints the paper timetables that the Fennick Valley Bus Cooperative pins to its
stops. Wenna Trezise wrote the first version for the winter season, when the old
spreadsheet could no longer fit the school routes on one sheet. Jory Penhale has looked
after it since the cooperative added the evening routes.

Each timetable is one page per stop. The tool reads the route sheets, works out the
departures of every route at each stop and lays them out as a table, with a QR code for
the live departures in the corner.

::instruction::

### Q
Where is the TimetablePage class defined?

### A
The `TimetablePage` class is defined in `ostwick/layout.py`.

### Q
How many stops fit on one timetable page?

### A
At most 38 stops (`MAX_STOPS_PER_PAGE`); the table continues overleaf.

### Q
How wide is the margin of a printed page?

### A
14 millimetres on every side (`PAGE_MARGIN_MM`).

### Q
Which function finds the next bus from a stop?

### A
`next_departure`, in `ostwick/schedule.py`.

### Q
When does a service day begin?

### A
At 04:30 (`SERVICE_DAY_STARTS`); a bus before that belongs to the day before.

### Q
How do I print the winter timetables?

### A
Run `ostwick print --season winter`.

### Q
Which routes run on school days only?

### A
Routes S1, S4 and S7 (`SCHOOL_ROUTES`).

### Q
Who looks after Ostwick today?

### A
Jory Penhale looks after Ostwick.

::probe::

### Q
In which Python module is the TimetablePage class?

### A
`ostwick/layout.py`

### Keys
- layout.py

### Q
What is the largest number of stops on a single page?

### A
38 stops.

### Keys
- 38

### Q
How many millimetres of margin does each page have?

### A
14 millimetres.

### Keys
- 14

### Q
What is the function that returns the next departure called?

### A
`next_departure`

### Keys
- next_departure

### Q
At what time does the service day start?

### A
04:30.

### Keys
- 04:30

### Q
What command prints the timetables for the winter season?

### A
`ostwick print --season winter`

### Keys
- ostwick print

### Q
Which routes only run when the schools are open?

### A
S1, S4 and S7.

### Keys
- S4

### Q
Who maintains Ostwick now?

### A
Jory Penhale.

### Keys
- Penhale

### Q
Who wrote the first version of Ostwick?

### A
Wenna Trezise.

### Keys
- Trezise

### Q
Which web address does the QR code on a timetable open?

### A
`https://buses.fennick.coop/live`

### Keys
- buses.fennick.coop

### Q
What font size do the large-print timetables use?

### A
16 points.

### Keys
- 16

### Q
Which depot is named at the bottom of each timetable?

### A
Pellow Yard.

### Keys
- Pellow
