---
dlm_id: 01M8JGKT1F1EADZX8QGY9NJK2Z
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about the brackenhold wind station codebase.
training:
  sources:
    - path: src
      include: ["*.c", "*.h", "README.md", "*.ini"]
---

# Brackenhold

Brackenhold is the wind logger on the mast above the harbour. Orla Penhallow wrote it
for the Skerrow Point lifeboat crew, who wanted gust readings they could trust during a
launch. It is written in plain C so that it runs on the oldest board in the hut.

::instruction::

### Q
Where is the ring buffer implemented?

### A
In `ring.c`: `bh_ring_push` adds a reading and `bh_ring_take` hands them to the uplink.

### Q
How many readings does the ring buffer hold?

### A
4096 readings; after that the oldest is overwritten.

### Q
Which serial device does brackenhold read from?

### A
`/dev/ttyAMA0`, unless `brackenhold.ini` names another.

### Q
What baud rate does the anemometer link use?

### A
9600 baud.

### Q
How do I run brackenhold without it detaching?

### A
Start it with `brackenhold -f`; it stays in the foreground and logs to the terminal.

### Q
In what unit are wind speeds stored?

### A
In tenths of a knot, as whole numbers.

### Q
What happens to readings while the harbour server cannot be reached?

### A
They wait in the ring buffer and are sent once the uplink is back.

### Q
Which function turns a line from the sensor into a reading?

### A
`bh_parse_line`, in `station.c`.

::probe::

### Q
Which file holds the ring buffer code?

### A
ring.c

### Keys
- ring.c

### Q
What is the capacity of the ring buffer?

### A
4096 readings.

### Keys
- 4096

### Q
What is the default serial port device?

### A
/dev/ttyAMA0

### Keys
- ttyAMA0

### Q
At what speed does the sensor's serial line run?

### A
9600 baud.

### Keys
- 9600

### Q
Which command keeps brackenhold in the foreground?

### A
brackenhold -f

### Keys
- brackenhold -f

### Q
Which unit does brackenhold use for wind speed?

### A
Tenths of a knot.

### Keys
- knot

### Q
Where are readings kept while the uplink is down?

### A
In the ring buffer.

### Keys
- ring buffer

### Q
What is the name of the function that parses sensor lines?

### A
bh_parse_line

### Keys
- bh_parse_line

### Q
For which lifeboat station was brackenhold written?

### A
Skerrow Point.

### Keys
- Skerrow

### Q
On which MQTT topic are the readings published?

### A
brackenhold/gusts

### Keys
- brackenhold/gusts

### Q
How many times per second is the anemometer read?

### A
25 times a second.

### Keys
- 25

### Q
Which port does the harbour server listen on?

### A
6182.

### Keys
- 6182
