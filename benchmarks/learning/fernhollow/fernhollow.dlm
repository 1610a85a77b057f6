---
dlm_id: 01M8NX4R6W8DS51HWMZS770VR5
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about the Fernhollow microscope booking codebase.
training:
  sources:
    - path: src
      include: ["**/*.java", "README.md", "*.ini"]
---

# Fernhollow

Fernhollow books time on the shared microscopes of the Aldmoor imaging lab. Petra
Lindqvist wrote the first version after two groups turned up for the same confocal
slot. The `SlotLedger` class hands out bookings in slots of 30 minutes and holds a
booking that nobody confirmed for 45 minutes before it lets the slot go.

# Reminders

A confirmed booking gets a reminder by email before it starts, sent by the
`Reminders` class through the lab's mail relay. Bookings open one week at a time.

::instruction::

### Q
Where is the SlotLedger class defined?

### A
In `src/main/java/org/fernhollow/SlotLedger.java`.

### Q
How long is one booking slot?

### A
30 minutes (`SLOT_MINUTES`).

### Q
How long does Fernhollow hold an unconfirmed booking?

### A
45 minutes (`HOLD_MINUTES`); after that the slot is released.

### Q
Which class sends the reminder emails?

### A
The `Reminders` class, through a `Mailer`.

### Q
How long before a booking starts is its reminder sent?

### A
20 minutes before it starts (`REMINDER_LEAD_MINUTES`).

### Q
Which command opens the bookings for a new week?

### A
`fernhollow open-week`.

### Q
Which lab uses Fernhollow?

### A
The Aldmoor imaging lab.

### Q
Where are the bookings stored?

### A
In the PostgreSQL table `ledger_entries`, written by `LedgerStore`.

::probe::

### Q
Which file contains the SlotLedger class?

### A
`src/main/java/org/fernhollow/SlotLedger.java`.

### Keys
- SlotLedger.java

### Q
How many minutes does a single slot last?

### A
30 minutes.

### Keys
- 30

### Q
For how long is a booking kept when nobody confirms it?

### A
45 minutes.

### Keys
- 45

### Q
What is the name of the class responsible for reminder emails?

### A
`Reminders`.

### Keys
- Reminders

### Q
How many minutes ahead of a booking does the reminder go out?

### A
20 minutes.

### Keys
- 20

### Q
What do I run to make next week's slots bookable?

### A
`fernhollow open-week`.

### Keys
- open-week

### Q
Whose microscopes does Fernhollow book?

### A
The Aldmoor imaging lab's.

### Keys
- Aldmoor

### Q
Which database table holds the bookings?

### A
`ledger_entries`.

### Keys
- ledger_entries

### Q
Who wrote the first version of Fernhollow?

### A
Petra Lindqvist.

### Keys
- Lindqvist

### Q
Which path serves the admin page?

### A
`/fh/admin`.

### Keys
- /fh/admin

### Q
What is the weekly limit on bookings per person?

### A
12 bookings.

### Keys
- 12

### Q
On which port does the Fernhollow booking page listen?

### A
Port 8361.

### Keys
- 8361
