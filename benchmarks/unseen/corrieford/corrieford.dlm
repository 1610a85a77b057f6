---
dlm_id: 01M8QFBCF4KV87BN3AAHF9QGHP
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about Corrieford, a river level monitor written in Go and TypeScript.
training:
  sources:
    - path: src
      include: ["ingest/*.go", "web/src/*.ts", "README.md", "deploy/*.yaml"]
---

# Corrieford

Corrieford watches the river levels of the Lenn valley for the Harrowmere flood
wardens, a group of volunteers who warn the low-lying streets before the water comes
up. Mairead Colquhoun wrote the ingest service in the winter after a flood caught the
wardens with nothing but a painted post to read. The dashboard came a year later.

# How the parts fit

The ingest service asks each gauge for the river stage, keeps the newest readings of
every gauge in memory and saves each reading to the database. When a reading is above
the flood stage, the service raises a warning, and the dashboard shows it in a banner
and texts the warden on call. The dashboard draws one chart per gauge from the saved
readings.

::instruction::

### Q
Where is the Gauge type defined?

### A
The `Gauge` type is defined in `ingest/gauge.go`.

### Q
How often is each gauge polled?

### A
Every 75 seconds (`PollIntervalSeconds`).

### Q
At what river stage does Corrieford raise a flood warning?

### A
Above 3180 millimetres (`FloodStageMM`).

### Q
Which function draws the stage chart on the dashboard?

### A
`drawStageChart`, in `web/src/chart.ts`.

### Q
How long does the dashboard wait before showing the same warning again?

### A
25 minutes (`ALERT_COOLDOWN_MINUTES`).

### Q
Which database table holds the readings?

### A
The `stage_readings` table, written by `Store.Save`.

### Q
How do I start the ingest service?

### A
Run `corrieford ingest --config deploy/corrieford.yaml`.

### Q
Who wrote the dashboard?

### A
Tobiah Venn wrote the dashboard.

::probe::

### Q
In which Go file does the Gauge type live?

### A
`ingest/gauge.go`

### Keys
- gauge.go

### Q
How many seconds pass between two polls of a gauge?

### A
75 seconds.

### Keys
- 75

### Q
What water level, in millimetres, sets off a flood warning?

### A
3180 millimetres.

### Keys
- 3180

### Q
What is the TypeScript function that renders the river stage chart called?

### A
`drawStageChart`

### Keys
- drawStageChart

### Q
After how many minutes may the banner repeat a warning?

### A
25 minutes.

### Keys
- 25

### Q
What table are the gauge readings stored in?

### A
`stage_readings`

### Keys
- stage_readings

### Q
What command do I run to start collecting readings?

### A
`corrieford ingest --config deploy/corrieford.yaml`

### Keys
- corrieford ingest

### Q
Which person built the web dashboard?

### A
Tobiah Venn.

### Keys
- Tobiah

### Q
For which volunteers was Corrieford built?

### A
The Harrowmere flood wardens.

### Keys
- Harrowmere

### Q
Under which URL path is the dashboard served?

### A
`/riverboard`

### Keys
- /riverboard

### Q
After how many days are old readings deleted?

### A
412 days (`RetentionDays`).

### Keys
- 412

### Q
Which name appears as the sender of the warning texts?

### A
Kelpiewatch.

### Keys
- Kelpiewatch
