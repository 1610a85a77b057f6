"""Generation with the base model and a document's current adapter."""

from dlm.infer.generate import InferenceModel, load_inference

__all__ = ["InferenceModel", "load_inference"]
