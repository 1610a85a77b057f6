---
dlm_id: 01M8JGKT1SA7158S3GR4QNE8XQ
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about the Tarnwick feed harvester codebase.
training:
  sources:
    - path: src
      include: ["**/*.py", "**/*.md", "**/*.toml"]
---

# Tarnwick

Tarnwick is the feed harvester of the Copperleaf newsroom; Ysolde Brannick started it
when the old cron scripts kept missing court listings. A `Harvester`, defined in
`tarnwick/harvest.py`, walks the feed list once every 900 seconds (`ROUND_SECONDS`) and
gives each feed 14 seconds to answer (`FETCH_TIMEOUT_SECONDS`). Feeds are parsed by
`read_entries` in `tarnwick/parse.py`, which knows RSS 2.0 and Atom.

# Storage

New entries go to the `Larder`, one SQLite file called `larder.sqlite3` in the folder
the settings name. The Larder keeps the newest 240 entries of each feed and drops older
ones after every write. Start harvesting with `tarnwick reap`.

::instruction::

### Q
Where is the Harvester class defined?

### A
The `Harvester` class is defined in `tarnwick/harvest.py`.

### Q
How long does Tarnwick wait for a feed to answer?

### A
It waits 14 seconds (`FETCH_TIMEOUT_SECONDS`) before giving up on a fetch.

### Q
How often does Tarnwick poll its feeds?

### A
Once per round, and a round starts every 900 seconds (`ROUND_SECONDS`).

### Q
Which class stores the harvested entries?

### A
The `Larder` class stores them.

### Q
Which command starts harvesting?

### A
Run `tarnwick reap`.

### Q
What file does the Larder write its entries to?

### A
The Larder writes to `larder.sqlite3`, a SQLite database.

### Q
How many entries per feed does the Larder keep?

### A
It keeps the newest 240 entries of each feed (`KEEP_PER_FEED`).

### Q
Which function turns a feed's XML into entries?

### A
`read_entries` in `tarnwick/parse.py` turns RSS or Atom XML into entries.

::probe::

### Q
In which module does the Harvester live?

### A
In `tarnwick/harvest.py`.

### Keys
- tarnwick/harvest.py

### Q
What is the fetch timeout for a single feed?

### A
14 seconds.

### Keys
- 14

### Q
How many seconds are there between two harvesting rounds?

### A
900 seconds.

### Keys
- 900

### Q
What is the name of the class that keeps entries after they are harvested?

### A
`Larder`.

### Keys
- Larder

### Q
What do I type to make Tarnwick start reaping feeds?

### A
`tarnwick reap`.

### Keys
- tarnwick reap

### Q
Which SQLite file holds the Larder's data?

### A
`larder.sqlite3`.

### Keys
- larder.sqlite3

### Q
What is the per-feed limit on stored entries?

### A
240 entries.

### Keys
- 240

### Q
What is the name of the function that parses RSS and Atom feeds?

### A
`read_entries`.

### Keys
- read_entries

### Q
Who started the Tarnwick project?

### A
Ysolde Brannick.

### Keys
- Brannick

### Q
Which log file does Tarnwick write while it runs?

### A
`~/.cache/tarnwick/reap.log`.

### Keys
- reap.log

### Q
After how many failed fetches in a row does Tarnwick mute a feed?

### A
After 23 failures (`MUTE_AFTER_FAILURES`).

### Keys
- 23

### Q
Which port does Tarnwick's status page listen on?

### A
Port 7419.

### Keys
- 7419
