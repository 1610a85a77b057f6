---
dlm_id: 01JG3F5R8Y0A2C4E6G8J0K2M4P
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about the Ferry task queue codebase.
training:
  sources:
    - path: ferry/src
      include: ["**/*.py"]
---

# Ferry

Ferry is a small task queue written by the Lighthouse team. Producers put tasks on a
Dock, and Deckhand worker threads take them off and run them. Ferry reads its settings
from `~/.ferryrc` when the file exists.

::instruction::

### Q
Where is the Dock class defined?

### A
The Dock class is defined in `ferry/queue.py`.

### Q
How many times does Ferry retry a failed task?

### A
Ferry retries a failed task 7 times (`MAX_RETRIES`).

### Q
What is the default capacity of a Dock?

### A
A Dock holds at most 512 tasks by default.

### Q
Which class runs tasks in a worker thread?

### A
The `Deckhand` class runs tasks in a worker thread.

### Q
Where does Ferry write finished tasks?

### A
The Ledger writes finished tasks to `ferry.journal`, one JSON line each.

### Q
How often does a Deckhand send a heartbeat?

### A
A Deckhand sends a heartbeat every 45 seconds.

### Q
What is the default priority of a task on a Dock?

### A
The default priority is `calm`.

### Q
Which command starts the workers?

### A
The command `ferry sail` starts the workers.

::probe::

### Q
In which file does the Dock class live?

### A
In `ferry/queue.py`.

### Keys
- ferry/queue.py

### Q
What is the maximum number of retries for a task that fails in Ferry?

### A
7 retries.

### Keys
- 7

### Q
By default, how many tasks can a Dock hold?

### A
512 tasks.

### Keys
- 512

### Q
What is the name of Ferry's worker thread class?

### A
Deckhand.

### Keys
- Deckhand

### Q
Which file receives the finished tasks?

### A
`ferry.journal`.

### Keys
- ferry.journal

### Q
What is the heartbeat interval of a Deckhand?

### A
45 seconds.

### Keys
- 45

### Q
If no priority is given, what priority does a task get?

### A
`calm`.

### Keys
- calm

### Q
How do you start Ferry's workers from the command line?

### A
Run `ferry sail`.

### Keys
- ferry sail

### Q
Which team wrote Ferry?

### A
The Lighthouse team.

### Keys
- Lighthouse

### Q
Where does Ferry read its settings from?

### A
From `~/.ferryrc`.

### Keys
- .ferryrc

### Q
How long does a Deckhand wait before retrying a failed task?

### A
2.5 seconds (`BACKOFF_SECONDS`).

### Keys
- 2.5

### Q
At what size does Ferry rotate its journal?

### A
At 64 MB (`JOURNAL_ROTATE_MB`).

### Keys
- 64
