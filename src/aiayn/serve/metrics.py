"""The server's Prometheus metrics (``/metrics``): request counts and latencies, batch sizes
and durations, completions, queue depths, and model loads and unloads."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# batch sizes: one bucket per size up to 16 (a bench reads the sizes back), then coarser
BATCH_BUCKETS = (*range(1, 17), 20, 24, 28, 32, 40, 48, 56, 64, 96, 128, 192, 256)


class Metrics:
    """Request counts and latencies, batch sizes and queue depths (Prometheus text format)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "aiayn_requests",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "aiayn_request_duration_seconds",
            "HTTP request latency by route",
            ["route"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "aiayn_batch_texts",
            "texts per batched model call",
            ["model"],
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.batch_seconds = Histogram(
            "aiayn_batch_duration_seconds",
            "time of one batched model call",
            ["model"],
            registry=self.registry,
        )
        self.completions = Counter(
            "aiayn_completions",
            "completions by finish reason (cancelled: the client went away)",
            ["model", "finish_reason"],
            registry=self.registry,
        )
        self.completion_tokens = Counter(
            "aiayn_completion_tokens", "tokens generated", ["model"], registry=self.registry
        )
        self.queue_depth = Gauge(
            "aiayn_queue_depth", "requests waiting per model", ["model"], registry=self.registry
        )
        self.loads = Counter(
            "aiayn_model_loads", "times a model was loaded", ["model"], registry=self.registry
        )
        self.load_seconds = Gauge(
            "aiayn_model_load_seconds",
            "how long a model's last load took (what the request that needed it waited)",
            ["model"],
            registry=self.registry,
        )
        self.unloads = Counter(
            "aiayn_model_unloads",
            "times a model was unloaded (the least recently used, past --max-loaded)",
            ["model"],
            registry=self.registry,
        )
        self.loaded = Gauge("aiayn_models_loaded", "models loaded now", registry=self.registry)

    def completed(self, model: str, tokens: int, reason: str) -> None:
        self.completions.labels(model, reason).inc()
        self.completion_tokens.labels(model).inc(tokens)
