---
dlm_id: 01M8JGKT1TAD6Z9B2HF6WV7HXT
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about the brindle uptime checker codebase.
training:
  sources:
    - path: src
      include: ["**/*.go", "**/*.md", "**/*.yaml"]
---

These are my notes on brindle, the uptime checker our platform group runs for the
shops and the wiki. Ingrid Solheim wrote the first version over a weekend; the README
in the source tree explains how it is used.

::instruction::

### Q
Where is the Checker type defined?

### A
The Checker type is defined in check/check.go.

### Q
How often does brindle check a target by default?

### A
Every 75 seconds, unless the paddock sets its own interval.

### Q
What is the longest brindle waits between checks of a failing target?

### A
The backoff doubles after each failure and stops at 37 minutes.

### Q
Which port does the brindle status page use?

### A
The status page listens on port 9462.

### Q
How do I check that my brindle configuration is valid?

### A
Run brindle lint; it validates brindle.yaml and exits.

### Q
What does brindle call a group of targets?

### A
A group of targets is a Paddock.

### Q
Where does brindle keep the history of its checks?

### A
In the SQLite file /var/lib/brindle/tally.db.

### Q
Which function sends an alert to the chat?

### A
SendFlare, in notify/notify.go, posts the alert to the chat webhook.

::probe::

### Q
Which file contains the definition of Checker?

### A
check/check.go

### Keys
- check/check.go

### Q
If a paddock sets no interval, how frequently are its targets checked?

### A
Every 75 seconds.

### Keys
- 75

### Q
Who wrote the first version of brindle?

### A
Ingrid Solheim.

### Keys
- Solheim

### Q
What is the maximum backoff for a target that keeps failing?

### A
37 minutes.

### Keys
- 37

### Q
On what port can I open brindle's status page?

### A
9462.

### Keys
- 9462

### Q
In which chat channel do brindle's alerts show up?

### A
In #brindle-howl.

### Keys
- brindle-howl

### Q
What command validates brindle.yaml?

### A
brindle lint

### Keys
- brindle lint

### Q
What is a named group of targets called in brindle?

### A
A Paddock.

### Keys
- Paddock

### Q
How many bytes of a response body does a brindle check read?

### A
12288 bytes (BodyReadLimit).

### Keys
- 12288

### Q
Which file stores brindle's check results?

### A
/var/lib/brindle/tally.db

### Keys
- tally.db

### Q
What is the name of the function that posts alerts?

### A
SendFlare.

### Keys
- SendFlare

### Q
How many days of check history does brindle keep?

### A
46 days.

### Keys
- 46
