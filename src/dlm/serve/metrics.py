"""Prometheus metrics of one server, on its own registry (text format at `GET /metrics`).

Series:
- `dlm_requests_total{endpoint, status}`: counter of finished requests;
- `dlm_request_seconds{endpoint}`: histogram of request latency (seconds, until the
  response body is complete, streaming included);
- `dlm_generated_tokens_total` / `dlm_prompt_tokens_total`: counters of completion
  ids generated and prompt ids of the generations that ran;
- `dlm_generation_requests_total{outcome}`: what became of each generation request:
  `admitted`, then one of `finished`, `failed`, `client_disconnected` (cancelled: the
  client went away), `shutdown` (cancelled by the server stopping); or refused at the
  door with 503: `queue_full`, `shutting_down`;
- `dlm_generation_queue_waiting` / `dlm_generation_running`: gauges at scrape time;
- `dlm_unexpected_errors_total`: requests answered with a 500 by an unexpected failure;
- `dlm_adapter_reload_failing{model}`: gauge, 1 while reloading that document's
  adapter fails (it serves its last good version; `/health` gives the reason), else 0;
  `dlm_adapter_reloads_total{model}` / `dlm_adapter_reload_failures_total{model}`:
  counters of versions swapped in and of failed checks (one per poll while failing;
  `dlm.serve.reload`);
- `dlm_tokenizer_cache_{hits,misses}_total{level}`, `dlm_tokenizer_cache_hit_rate{level}`,
  `dlm_tokenizer_cache_entries{level}`, `dlm_tokenizer_cache_bytes{level}` and
  `dlm_tokenizer_cache_bypassed_total`:
  read from the cache at scrape time (`level` is "l0" or "l1"; a level that is off
  has no series);
- `dlm_tokenizer_cache_tokens_total{source}`: ids of encode results taken from the
  cache (`cached`) or produced by the tokenizer (`encoded`), and
  `dlm_tokenizer_cache_token_reuse_ratio`: cached / (cached + encoded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dlm.serve.reload import ReloadStatus
from dlm.serve.tokcache import CachedTokenizer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _CacheCollector(Collector):
    def __init__(self, cached: CachedTokenizer):
        self._cached = cached

    def collect(self) -> Iterator[Metric]:
        stats = self._cached.stats()
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {
            "hits": CounterMetricFamily("dlm_tokenizer_cache_hits", "Cache lookups that hit.", labels=["level"]),
            "misses": CounterMetricFamily("dlm_tokenizer_cache_misses", "Cache lookups that missed.", labels=["level"]),
            "hit_rate": GaugeMetricFamily("dlm_tokenizer_cache_hit_rate", "hits / lookups.", labels=["level"]),
            "entries": GaugeMetricFamily("dlm_tokenizer_cache_entries", "Entries held.", labels=["level"]),
            "bytes": GaugeMetricFamily("dlm_tokenizer_cache_bytes", "Bytes held (ids and keys).", labels=["level"]),
        }
        for level, level_stats in (("l0", stats.l0), ("l1", stats.l1)):
            if level_stats is None:
                continue
            for name, family in families.items():
                family.add_metric([level], float(getattr(level_stats, name)))
        yield from families.values()
        yield CounterMetricFamily(
            "dlm_tokenizer_cache_bypassed", "Encodes passed to the plain tokenizer.", value=stats.bypassed
        )
        tokens = CounterMetricFamily(
            "dlm_tokenizer_cache_tokens", "Ids of encode results by where they came from.", labels=["source"]
        )
        tokens.add_metric(["cached"], float(stats.cached_ids))
        tokens.add_metric(["encoded"], float(stats.encoded_ids))
        yield tokens
        yield GaugeMetricFamily(
            "dlm_tokenizer_cache_token_reuse_ratio",
            "Share of encoded ids taken from the cache.",
            value=stats.reuse_ratio,
        )


class _QueueCollector(Collector):
    def __init__(self, read: Callable[[], tuple[int, int]]):
        self._read = read

    def collect(self) -> Iterator[Metric]:
        waiting, running = self._read()
        yield GaugeMetricFamily("dlm_generation_queue_waiting", "Requests waiting for the model.", value=waiting)
        yield GaugeMetricFamily("dlm_generation_running", "Generations running (0 or 1).", value=running)


class _ReloadCollector(Collector):
    def __init__(self, status: ReloadStatus, watched: Callable[[], list[str]]):
        self._status = status
        self._watched = watched

    def collect(self) -> Iterator[Metric]:
        failing = self._status.failing()
        reloads, failures = self._status.counts()
        gauge = GaugeMetricFamily(
            "dlm_adapter_reload_failing", "1 while reloading the model's adapter fails.", labels=["model"]
        )
        done = CounterMetricFamily("dlm_adapter_reloads", "Adapter versions swapped in.", labels=["model"])
        failed = CounterMetricFamily("dlm_adapter_reload_failures", "Failed reload checks.", labels=["model"])
        for model in self._watched():
            gauge.add_metric([model], 1.0 if model in failing else 0.0)
            done.add_metric([model], float(reloads.get(model, 0)))
            failed.add_metric([model], float(failures.get(model, 0)))
        yield from (gauge, done, failed)


class ServerMetrics:
    """The metrics of one app; `render()` gives the Prometheus text exposition."""

    def __init__(self, cached: CachedTokenizer):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "dlm_requests", "Finished HTTP requests.", ["endpoint", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "dlm_request_seconds",
            "Request latency in seconds.",
            ["endpoint"],
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.generated_tokens = Counter("dlm_generated_tokens", "Completion tokens generated.", registry=self.registry)
        self.prompt_tokens = Counter(
            "dlm_prompt_tokens", "Prompt tokens of generations that ran.", registry=self.registry
        )
        self.generations = Counter(
            "dlm_generation_requests",
            "Generation requests by outcome (see the module docstring).",
            ["outcome"],
            registry=self.registry,
        )
        self.unexpected_errors = Counter(
            "dlm_unexpected_errors", "Requests answered 500 by an unexpected failure.", registry=self.registry
        )
        self.registry.register(_CacheCollector(cached))

    def watch_queue(self, read: Callable[[], tuple[int, int]]) -> None:
        """Report `read()` = (waiting, running) as gauges at each scrape."""
        self.registry.register(_QueueCollector(read))

    def watch_reloads(self, status: ReloadStatus, watched: Callable[[], list[str]]) -> None:
        """Report `status` for the model ids `watched()` gives, at each scrape."""
        self.registry.register(_ReloadCollector(status, watched))

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
