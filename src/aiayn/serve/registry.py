"""The served models, their batching queues and the server's metrics."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable, Hashable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from aiayn.serve.access import require_admitted
from aiayn.serve.batching import BatchQueue, Job, QueueClosed, QueueFull
from aiayn.serve.config import ServeConfig
from aiayn.serve.errors import ServeError
from aiayn.serve.models import ModelSpec, ServedModel

log = logging.getLogger("aiayn.serve")

TRANSLATOR, ENCODER, DECODER = "encoder-decoder", "encoder-only", "decoder-only"
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

    def completed(self, model: str, tokens: int, reason: str) -> None:
        self.completions.labels(model, reason).inc()
        self.completion_tokens.labels(model).inc(tokens)


class Registry:
    """Loads the models (in the background), then routes work to their queues."""

    def __init__(self, specs: list[ModelSpec], config: ServeConfig) -> None:
        names = [s.name for s in specs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"two models are named {duplicates[0]!r}: give each its own --name")
        if not specs:
            raise ValueError("no model to serve")
        self.specs, self.config = specs, config
        self.models: dict[str, ServedModel] = {}
        self.queues: dict[str, BatchQueue] = {}
        self.metrics = Metrics()
        self.ready = threading.Event()
        self.error: str | None = None
        self.on_error: Callable[[str], None] | None = None
        # run on each model once loaded: an error there fails the load (the server's
        # glossary checked for the model's languages)
        self.check: Callable[[ServedModel], None] | None = None
        self._loader: threading.Thread | None = None
        self._closing = threading.Event()

    def load(self) -> None:
        """Load every model and start its queue; on failure record the error. Stops between
        models once ``close`` is called."""
        try:
            for spec in self.specs:
                if self._closing.is_set():
                    return
                model = ServedModel(spec, decoders=self.config.model_decoders)
                log.info(
                    "loaded %s (%s, %d parameters) from %s on %s (%s)",
                    spec.name,
                    model.family,
                    model.parameters,
                    spec.path,
                    model.api.device,
                    model.api.dtype,
                )
                if self.check is not None:
                    self.check(model)
                self.models[spec.name] = model
                self.queues[spec.name] = self._queue(spec.name)
        except Exception as e:  # noqa: BLE001 - reported by /health and the command
            self.error = f"{type(e).__name__}: {e}" if not isinstance(e, ValueError) else str(e)
            log.error("could not load the models: %s", self.error)
            if self.on_error is not None:
                self.on_error(self.error)
            return
        # what is loaded now lives as long as the server: frozen, the garbage collector's
        # full collections no longer walk it (200,000 objects of torch and the models, 0.1-0.4
        # s holding the interpreter's lock on a 2-core host, which the event loop waited for
        # whenever a request's work had made enough new objects: a glossary's expression)
        gc.collect()
        gc.freeze()
        self.ready.set()

    def load_in_background(self) -> threading.Thread:
        self._loader = threading.Thread(target=self.load, name="load-models", daemon=True)
        self._loader.start()
        return self._loader

    def _queue(self, name: str) -> BatchQueue:
        c = self.config
        size = self.metrics.batch_size.labels(name)
        seconds = self.metrics.batch_seconds.labels(name)

        def on_batch(items: int, jobs: int, duration: float) -> None:
            size.observe(items)
            seconds.observe(duration)

        queue = BatchQueue(
            name, c.max_batch, c.batch_wait_ms / 1000, c.queue_size, on_batch,
            workers=c.model_decoders,
        )  # fmt: skip
        self.metrics.queue_depth.labels(name).set_function(lambda: queue.depth)
        return queue

    def close(self) -> None:
        """Stop loading (after the model being loaded: a process that exits while torch loads
        one aborts in native code), then let each queue finish its work."""
        self._closing.set()
        if self._loader is not None:
            self._loader.join()
        for queue in self.queues.values():
            queue.close(timeout=self.config.timeout)
        gc.unfreeze()  # a process serving again (a test's) collects them as before

    def require_ready(self) -> None:
        if not self.ready.is_set():
            if self.error:
                raise ServeError(500, f"the models failed to load: {self.error}")
            raise ServeError(503, "the models are still loading", headers={"Retry-After": "2"})

    def get(self, name: str) -> ServedModel:
        """The model called ``name``; 404 naming the served ones."""
        self.require_ready()
        if name not in self.models:
            raise ServeError(
                404, f"model {name!r} not found; served: {', '.join(self.models)}", "model"
            )
        return self.models[name]

    def pick(self, name: str | None, family: str, route: str) -> ServedModel:
        """The model a request names, or the only one of ``family``."""
        self.require_ready()
        if name is not None:
            model = self.get(name)
            if model.family != family:
                raise ServeError(
                    422,
                    f"model {name!r} is {model.family}; {route} needs "
                    f"{'an' if family[0] in 'aeiou' else 'a'} {family} model",
                    "model",
                )
            return model
        fits = [m for m in self.models.values() if m.family == family]
        if route == "/v1/classify":
            fits = [m for m in fits if m.is_classifier]
        if len(fits) == 1:
            return fits[0]
        if not fits:
            raise ServeError(404, f"no {family} model is served for {route}", "model")
        raise ServeError(
            422,
            f"model: required, {len(fits)} models fit ({', '.join(m.name for m in fits)})",
            "model",
        )

    def submit(
        self,
        model: ServedModel,
        items: list,
        run: Callable[[list], list],
        key: Hashable | None = None,
    ) -> tuple[Job, asyncio.Future]:
        """Queue ``items`` on ``model``'s worker: (job, future of the results). Only for a
        request the access check admitted (``aiayn.serve.access``)."""
        require_admitted(f"a request for model {model.name}")
        try:
            return self.queues[model.name].submit(items, run, key)
        except QueueFull as e:
            raise ServeError(503, f"{e}; try again", headers={"Retry-After": "1"}) from None
        except QueueClosed as e:
            raise ServeError(503, str(e), headers={"Retry-After": "5"}) from None

    def cancel(self, model: ServedModel, job: Job) -> None:
        """Give ``job`` up (on the event loop): out of ``model``'s queue if it waits there; a
        batch it is in runs on, its share of the results dropped."""
        self.queues[model.name].cancel(job)
        job.future.cancel()

    async def run(
        self,
        model: ServedModel,
        items: list,
        run: Callable[[list], list],
        key: Hashable | None = None,
    ) -> list:
        """Queue ``items`` on ``model``'s worker and await their results: 504 once they have
        decoded ``--timeout`` seconds, counted from when a worker took them into a batch (the
        time waiting in the queue is not counted: a request behind a slow batch is served,
        not dropped). A request given up (timed out, or cancelled) leaves the queue at once
        if it still waits there; if its batch runs, its share of the results is dropped."""
        job, future = self.submit(model, items, run, key)
        timeout = self.config.timeout
        try:
            return await _within(job, future, timeout)
        except TimeoutError:
            self.cancel(model, job)
            raise ServeError(504, f"decoding took over {timeout:g} s (--timeout)") from None
        except asyncio.CancelledError:
            self.cancel(model, job)
            raise
        except ValueError as e:
            raise ServeError(422, str(e)) from None
        except ServeError:
            raise
        except Exception as e:  # noqa: BLE001 - an inference error is the server's fault
            log.exception("inference failed on %s", model.name)
            raise ServeError(500, f"inference failed: {type(e).__name__}: {e}") from None


async def _within(job: Job, future: asyncio.Future, timeout: float):
    """``future``'s result, or TimeoutError once ``job`` has run ``timeout`` seconds since a
    worker took it. Its timer is set for ``timeout`` at first and, when it goes off while the
    job still waits in the queue, again for ``timeout`` (the job's own time then ends later
    still), so a request answered in time costs one timer, as before."""
    left = timeout
    while True:
        try:
            return await asyncio.wait_for(asyncio.shield(future), left)
        except TimeoutError:
            started = job.started_at  # set by the worker's thread
            if started is not None:
                left = started + timeout - time.monotonic()
                if left <= 0:
                    raise
            else:
                left = timeout
