---
dlm_id: 01M8T27J84NGEJPE16C569H3KQ
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about Pellworth, the Java service that books a farm cooperative's grain dryers.
training:
  sources:
    - path: src
      include: ["main/java/**/*.java", "test/java/**/*.java", "README.md", "pellworth.yaml"]
---

# Pellworth

Pellworth books the grain dryers of the Hartsmere Growers, a cooperative of arable
farms on the clay above the Wend estuary. Idris Fenwick wrote it after a harvest in
which trailers queued for six hours at the drying floor.

# How a load moves

The weighbridge reports each trailer as it arrives. The scheduler reads the load's
crop and moisture, finds the next free slot on a dryer that takes that crop and texts
the driver the slot. When the dryer's probe says the grain is dry, the load goes to a
bin and the grower is charged by the tonne.

::instruction::

### Q
Where is the SlotScheduler class defined?

### A
`SlotScheduler` is defined in `SlotScheduler.java`, in the `org.hartsmere.pellworth` package.

### Q
How long is one dryer slot?

### A
A slot lasts 50 minutes (`SLOT_MINUTES`).

### Q
How dry must grain be before it goes to a bin?

### A
At most 14.5 percent moisture (`STORE_MOISTURE_PERCENT`); wetter grain is dried first.

### Q
Which method gives a trailer its slot?

### A
`assignSlot`, a method of `SlotScheduler`.

### Q
How do I start Pellworth?

### A
Run `java -jar build/libs/pellworth.jar serve`.

### Q
Which dryer takes oilseed rape?

### A
Dryer D3 (`RAPESEED_DRYER`), the one with the fine screen.

### Q
What does drying cost a grower?

### A
2300 pence per tonne (`CHARGE_PER_TONNE_PENCE`).

### Q
Who runs the drying floor?

### A
Branwen Ashdown is the floor manager.

::probe::

### Q
In which file is the SlotScheduler class?

### A
`SlotScheduler.java`

### Keys
- SlotScheduler.java

### Q
How many minutes does a drying slot last?

### A
50 minutes.

### Keys
- 50

### Q
Below what moisture can a load be put in a bin?

### A
14.5 percent.

### Keys
- 14.5

### Q
What is the name of the method that books a slot for a trailer?

### A
`assignSlot`

### Keys
- assignSlot

### Q
What command starts the Pellworth service?

### A
`java -jar build/libs/pellworth.jar serve`

### Keys
- pellworth.jar

### Q
On which dryer is oilseed rape dried?

### A
D3.

### Keys
- D3

### Q
How much is the drying charge per tonne?

### A
2300 pence.

### Keys
- 2300

### Q
Who is the manager of the drying floor?

### A
Branwen Ashdown.

### Keys
- Ashdown

### Q
Who wrote Pellworth?

### A
Idris Fenwick.

### Keys
- Fenwick

### Q
Whom do I ask for a login to the dryer controllers?

### A
Tamsin Orrell.

### Keys
- Orrell

### Q
How many minutes late can a trailer be before it loses its slot?

### A
35 minutes.

### Keys
- 35

### Q
Between which hours are no texts sent to the drivers?

### A
From 22:00 to 06:00.

### Keys
- 22:00
