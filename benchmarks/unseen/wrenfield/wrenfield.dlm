---
dlm_id: 01M9WF7N2ESXB4GJ0Y8RCKDTHQ
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about the Wrenfield hive scale watcher, a Node.js project.
training:
  sources:
    - path: src
      include: ["lib/*.mjs", "README.md", "config/*.yml"]
---

# Wrenfield

Wrenfield is a small Node.js service that watches the weight of beehives and warns
the beekeepers when a colony swarms. It began after a wet June in which three swarms
left unnoticed and were never recovered. The first scales were set up at the apiary
in Quenby Bottom, on a fence post beside the hives, with a second-hand laptop in a
biscuit tin running the code. The project has been rewritten once since then, from a
single script into the three modules it has now.

# The people

Corisande Ebbesworth keeps the hives and decides what Wrenfield should warn about.
Anselm Gethwick wrote the first script over one winter and still reviews every change.
The morning digest was Corisande's idea: she wanted to know over breakfast which hives
were gaining weight from the nectar flow and which were going light. Volunteers who
help at inspections are added to the list of people who get the swarm texts.

# How it watches the hives

Every hive stands on its own scale, and Wrenfield asks each scale for a weight every
95 seconds. Weights are kept as whole decagrams, so a reading never needs a decimal
point. When a hive loses 260 decagrams within 11 minutes, Wrenfield takes it for a
swarm and sends a text message at once. Readings that a scale could not have made,
such as negative weights, are thrown away before they reach the log.

# The morning digest

Each morning Wrenfield writes a digest with every hive's latest weight and how much
it changed over the past day. The digest is built by `composeDigest` from the
readings in the hive log. It is sent by email to the beekeepers, and a digest can be
sent by hand when someone wants one straight after an inspection.

::instruction::

### Q
Which module detects swarms?

### A
`lib/swarm.mjs`, in the function `detectSwarm`.

### Q
How much weight must a hive lose to raise a swarm alert?

### A
260 decagrams (2.6 kg) within 11 minutes.

### Q
How often are the hive scales read?

### A
Every 95 seconds (`READ_INTERVAL_SECONDS`).

### Q
How do I send the daily digest immediately?

### A
Run `npx wrenfield digest --now`.

### Q
In what unit are hive weights stored?

### A
In decagrams, as whole numbers.

### Q
Which function writes the morning digest?

### A
`composeDigest`, in `lib/digest.mjs`.

### Q
Where does Wrenfield keep its readings?

### A
In `hivelog.ndjson`, one JSON line per reading.

### Q
Which class talks to a scale over its serial line?

### A
`ScaleLink`, in `lib/scale.mjs`.

::probe::

### Q
In which file is the swarm check written?

### A
`lib/swarm.mjs`

### Keys
- lib/swarm.mjs

### Q
What sudden drop in a hive's weight counts as a swarm?

### A
260 decagrams within 11 minutes.

### Keys
- 260

### Q
What is the polling interval of the scales, in seconds?

### A
95 seconds.

### Keys
- 95

### Q
Which command pushes out the digest right away instead of waiting for the morning?

### A
`npx wrenfield digest --now`

### Keys
- wrenfield digest

### Q
What unit of mass does Wrenfield record weights in?

### A
Decagrams.

### Keys
- decagrams

### Q
What's the name of the function that builds the daily summary?

### A
`composeDigest`

### Keys
- composeDigest

### Q
What file are the scale readings appended to?

### A
`hivelog.ndjson`

### Keys
- hivelog.ndjson

### Q
What class handles the serial connection to a scale?

### A
`ScaleLink`

### Keys
- ScaleLink

### Q
At which apiary was Wrenfield first set up?

### A
Quenby Bottom.

### Keys
- Quenby

### Q
Which URL path shows the live weight of every hive?

### A
`/apiary/gauge`

### Keys
- /apiary/gauge

### Q
After how many days are old readings pruned from the hive log?

### A
163 days (`PRUNE_AFTER_DAYS`).

### Keys
- 163

### Q
What sender name do the swarm text messages show?

### A
Combmerrow.

### Keys
- Combmerrow
