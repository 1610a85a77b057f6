"""dlm: turn a `.dlm` document into a LoRA adapter on a small LLM, and serve it."""

# Before anything imports torch: pin its CPU kernels to one ISA (see dlm.cpu_isa).
from dlm.cpu_isa import pin_cpu_isa

pin_cpu_isa()

__version__ = "0.1.0"
