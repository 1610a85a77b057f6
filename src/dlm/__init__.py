"""dlm: turn a `.dlm` document into a LoRA adapter on a small LLM, and serve it."""

__version__ = "0.1.0"
