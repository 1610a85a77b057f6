---
dlm_id: 01M8JGKT1WHR2TWT1QT2Y0GN4B
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about the lanternfish webhook relay codebase.
training:
  sources:
    - path: src
      include: ["**/*.ts", "README.md", "*.json"]
---

# Lanternfish

Lanternfish is the webhook relay that Teodora Quill built at Marrowgate Freight so the
order system would stop calling billing and the warehouse directly.

# Delivery

Each event is signed and posted to every subscriber. A delivery that fails is retried
with a delay that doubles each time; when the retries run out the event waits in the
Sump until someone replays it.

::instruction::

### Q
Where is the Relay class defined?

### A
relay.ts

### Q
How many times does lanternfish retry a failed delivery?

### A
9 times.

### Q
Which HTTP header carries the signature of an event?

### A
X-Lanternfish-Sig

### Q
Which algorithm signs the payloads?

### A
HMAC with SHA384.

### Q
What is the largest payload lanternfish accepts?

### A
768 KB.

### Q
How do I resend the events that could not be delivered?

### A
npx lanternfish replay

### Q
Where do events go when every retry has failed?

### A
Into the Sump.

### Q
How long does lanternfish wait before the first retry?

### A
1500 milliseconds, doubled on each later retry.

::probe::

### Q
Which file holds the Relay class?

### A
relay.ts

### Keys
- relay.ts

### Q
What is the maximum number of delivery attempts?

### A
9.

### Keys
- 9

### Q
What is the name of the signature header?

### A
X-Lanternfish-Sig

### Keys
- X-Lanternfish-Sig

### Q
What hash function is used for event signatures?

### A
SHA384 (HMAC).

### Keys
- SHA384

### Q
How big can an event body be?

### A
768 KB.

### Keys
- 768

### Q
Which command replays the parked events?

### A
npx lanternfish replay

### Keys
- lanternfish replay

### Q
What is the name of the place where undeliverable events are kept?

### A
The Sump.

### Keys
- Sump

### Q
What is the initial retry delay?

### A
1500 ms.

### Keys
- 1500

### Q
At which company was lanternfish built?

### A
Marrowgate Freight.

### Keys
- Marrowgate

### Q
Which URL path answers health checks?

### A
/lf/healthz

### Keys
- /lf/healthz

### Q
For how many minutes does lanternfish remember an event id to drop duplicates?

### A
135 minutes.

### Keys
- 135

### Q
On which port does lanternfish listen?

### A
4717.

### Keys
- 4717
