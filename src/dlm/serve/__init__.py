"""`dlm serve`: an OpenAI-compatible server for a document's adapter, and the
two-level tokenizer cache it tokenizes prompts with (`dlm.serve.tokcache`)."""
