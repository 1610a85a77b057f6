---
dlm_id: 01M82E20JJ2XKSFH4S4XVQ8Q5N
dlm_version: 1
base_model: smollm2-135m
training:
  lora_r: 4
  lora_alpha: 8
  # every linear layer, pinned: the golden's bytes do not move with the default's layers
  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
  lora_dropout: 0.05  # keyed LoRA dropout masks are part of the pinned bytes
  learning_rate: 0.001
  max_steps: 4
  batch_size: 2
  sequence_len: 64
  seed: 1234
  recast: true  # its prose sentences train as pairs too, as when the golden was recorded
  precision: fp32  # bf16 would make the bytes depend on the CPU's AVX512-BF16, which the tuple does not name
  replay: 0  # the golden pins the loop's bytes on the document alone; replay and synth rows have their own tests
  synth:
    enabled: false
  eval:
    judge: false  # the golden pins the adapter bytes; the probe report has its own tests
---

# The lighthouse keeper

The lighthouse on Brannock Point was kept by Ida Vell for thirty-one years.
She lit the lamp at dusk, wound the clockwork at midnight and logged every
passing ship in a green ledger that still sits in the harbour museum.

# The ledger

The green ledger records four hundred and twelve ships. The last entry,
written in a steady hand, notes a fishing boat named Marram returning at dawn.

::instruction::

### Q
Who kept the lighthouse on Brannock Point?

### A
Ida Vell kept it for thirty-one years.

### Q
Where is the green ledger now?

### A
In the harbour museum.
