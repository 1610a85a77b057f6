"""`dlm serve`: an OpenAI-compatible server for a document's adapter, and the
two-level tokenizer cache it tokenizes prompts with (`dlm.serve.tokcache`).

The defaults below live here, importing nothing, so the CLI can show them without
loading the server.
"""

DEFAULT_MAX_QUEUE = 32
"""Generation requests that may wait while one runs; more are answered 503."""

DEFAULT_SHUTDOWN_TIMEOUT = 30.0
"""Seconds in-flight requests get to finish once the server is told to stop."""
