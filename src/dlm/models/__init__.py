"""Base models: resolve a `base_model` spec to a local Hugging Face folder."""

from dlm.models.base import BaseModelRef, check_base_model, load_model, load_tokenizer, resolve_base_model

__all__ = ["BaseModelRef", "check_base_model", "load_model", "load_tokenizer", "resolve_base_model"]
