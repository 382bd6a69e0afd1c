"""The served models and their batching queues (their metrics: ``aiayn.serve.metrics``).

Every model directory is checked at start (its config, tokenizer, languages: what routes
requests), without its weights; a model loads when a request first needs it, off the event
loop, one load at a time, once however many requests wait for it (``--preload`` loads some or
all at start instead). ``--max-loaded N`` keeps at most N loaded: before another loads, the
least recently used model that no request holds is unloaded (its queue is then empty, and
closed). A request holds the models it uses (``Registry.holding``, or ``pick`` until its
answer is sent), so none is unloaded under it; while requests hold more than N at once, more
stay loaded until they are done. Each load's time is logged, counted in the metrics
(``aiayn_model_load_seconds``, ``aiayn_model_loads``) and listed by ``/v1/models``."""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path

from aiayn.serve.access import require_admitted
from aiayn.serve.batching import BatchQueue, Job, QueueClosed, QueueFull
from aiayn.serve.config import ServeConfig
from aiayn.serve.entry import Entry
from aiayn.serve.errors import ServeError
from aiayn.serve.metrics import Metrics
from aiayn.serve.models import ModelSpec, ServedModel, model_facts
from aiayn.serve.pairs import Pairs
from aiayn.serve.redact import without_paths

log = logging.getLogger("aiayn.serve")

TRANSLATOR, ENCODER, DECODER = "encoder-decoder", "encoder-only", "decoder-only"

# the models the request being answered holds (``Registry.pick``), released as it ends
_held: ContextVar[list | None] = ContextVar("aiayn_held_models", default=None)


class HeldModels:
    """ASGI middleware: the models a request picks by name (``Registry.pick``) stay loaded
    until its answer is sent (a stream's last event included), then are released."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        held: list = []
        token = _held.set(held)
        try:
            await self.app(scope, receive, send)
        finally:
            _held.reset(token)
            for release in held:
                release()


class Registry:
    """The served models, by name and by language pair (``pairs``): checked at start, then
    each loaded (off the event loop, one load at a time) when a request first needs it, or
    at start (``--preload``); at most ``--max-loaded`` loaded at once, the least recently
    used unloaded to make room. Work reaches a model through its batching queue."""

    def __init__(self, specs: list[ModelSpec], config: ServeConfig) -> None:
        names = [s.name for s in specs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"two models are named {duplicates[0]!r}: give each its own --name")
        if not specs:
            raise ValueError("no model to serve")
        self.specs, self.config = specs, config
        self.entries: dict[str, Entry] = {s.name: Entry(s) for s in specs}
        self.pairs = Pairs([])
        # the loaded ones (kept in step with the entries, under the lock)
        self.models: dict[str, ServedModel] = {}
        self.queues: dict[str, BatchQueue] = {}
        self.metrics = Metrics()
        self.metrics.loaded.set_function(lambda: len(self.models))
        self.ready = threading.Event()
        self.error: str | None = None  # why the models failed to load, for the log
        self.on_error: Callable[[str], None] | None = None
        # run on each model's entry at start: an error there fails the start (the server's
        # glossary checked for the model's languages)
        self.check: Callable[[Entry], None] | None = None
        self._loader: threading.Thread | None = None
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._loads = ThreadPoolExecutor(1, thread_name_prefix="load-model")  # one at a time

    # --- start ---------------------------------------------------------------------------

    def load(self) -> None:
        """Check every model directory (without loading weights), then load the ones
        ``--preload`` names; on failure record the error. Stops between models once
        ``close`` is called."""
        try:
            for entry in self.entries.values():
                if self._closing.is_set():
                    return
                entry.facts = model_facts(entry.spec)
                if self.check is not None:
                    self.check(entry)
            served = [e for e in self.entries.values() if e.is_translator and e.languages]
            names = {}  # a language's name as the first model naming it gives it
            for e in served:
                names = {**e.facts.language_names, **names}
            self.pairs = Pairs(((e.name, e.languages) for e in served), names)
            for entry in self.preloaded():
                if self._closing.is_set():
                    return
                self._load(entry)
        except Exception as e:  # noqa: BLE001 - reported by /health and the command
            self.error = f"{type(e).__name__}: {e}" if not isinstance(e, ValueError) else str(e)
            log.error("could not load the models: %s", self.error)
            if self.on_error is not None:
                self.on_error(self.error)
            return
        if len(self.models) < len(self.entries):
            log.info(
                "%d models (%d language pairs) checked, %d loaded; the others load when a "
                "request first needs them",
                len(self.entries),
                len(self.pairs.direct),
                len(self.models),
            )
        # what is loaded now lives as long as the server: frozen, the garbage collector's
        # full collections no longer walk it (200,000 objects of torch and the models, 0.1-0.4
        # s holding the interpreter's lock on a 2-core host, which the event loop waited for
        # whenever a request's work had made enough new objects: a glossary's expression)
        gc.collect()
        gc.freeze()
        self.ready.set()

    def preloaded(self) -> list[Entry]:
        """The models loaded at start: ``--preload all`` every one (the first
        ``--max-loaded``), ``none`` none; ``auto`` every one for a server of one language pair
        at most (with any other models), none for a server of several pairs."""
        preload = self.config.preload
        if preload == "auto":
            preload = "all" if len(self.pairs.direct) <= 1 else "none"
        if preload == "none":
            return []
        entries = list(self.entries.values())
        return entries[: self.config.max_loaded] if self.config.max_loaded else entries

    def load_in_background(self) -> threading.Thread:
        """``load`` on a thread of its own, which then imports the libraries the models not
        loaded yet will need (``import_libraries``)."""

        def run() -> None:
            self.load()
            if self.ready.is_set():
                self.import_libraries()

        self._loader = threading.Thread(target=run, name="load-models", daemon=True)
        self._loader.start()
        return self._loader

    def import_libraries(self) -> None:
        """Import the modules that loading the models not loaded yet imports (CTranslate2,
        an Argos Translate package's sentence splitter: spaCy's import alone took 0.5-2 s of
        a pair's first request), so that the request that loads one need not wait for them
        (one that comes first waits for the import under way, as it would have imported it).
        A library that is missing is left for the load to name."""
        wanted = {
            library
            for entry in self.entries.values()
            if entry.model is None and entry.facts is not None
            for library in entry.facts.libraries
        }
        for library in sorted(wanted):
            if self._closing.is_set():
                return
            try:
                importlib.import_module(library)
            except Exception:  # noqa: BLE001, S112 - the load reports it, with its model's name
                continue
        # not frozen for the collector as ``load`` freezes what it made: a request may be
        # loading a model now, which a freeze would keep after its unload

    # --- loading and unloading (on the loader thread) ------------------------------------

    def _load(self, entry: Entry) -> ServedModel:
        """Load ``entry``'s model and start its queue, room made first."""
        if entry.model is not None:
            return entry.model
        self._make_room(entry)
        start = time.perf_counter()
        model = ServedModel(entry.spec, decoders=self.config.model_decoders)
        seconds = time.perf_counter() - start
        queue = self._queue(entry.name)
        with self._lock:
            entry.model, entry.queue = model, queue
            entry.loads += 1
            entry.load_seconds = seconds
            entry.last_used = time.monotonic()
            self.models[entry.name], self.queues[entry.name] = model, queue
            loaded = len(self.models)
        self.metrics.loads.labels(entry.name).inc()
        self.metrics.load_seconds.labels(entry.name).set(seconds)
        log.info(
            "loaded %s (%s, %d parameters) from %s on %s (%s) in %.2f s; %d of %d loaded",
            entry.name,
            model.family,
            model.parameters,
            entry.spec.path,
            model.api.device,
            model.api.dtype,
            seconds,
            loaded,
            len(self.entries),
        )
        return model

    def _load_for_request(self, entry: Entry) -> None:
        try:
            if self._closing.is_set():
                raise QueueClosed("the server is shutting down")
            self._load(entry)
        finally:
            with self._lock:
                entry.loading = None

    def _make_room(self, incoming: Entry | None = None) -> None:
        """Unload the least recently used models no request holds until, with ``incoming``,
        at most ``--max-loaded`` are loaded (more only while requests hold more)."""
        bound = self.config.max_loaded
        if not bound:
            return
        while True:
            with self._lock:
                loaded = [e for e in self.entries.values() if e.model is not None]
                count = len(loaded) + (incoming is not None and incoming.model is None)
                idle = [e for e in loaded if e.users == 0 and e is not incoming]
                if count <= bound or not idle:
                    return
                victim = min(idle, key=lambda e: e.last_used)
                queue = victim.queue
                victim.model = victim.queue = None
                del self.models[victim.name], self.queues[victim.name]
            # no request holds it, so none queues work on it any more: its queue holds at most
            # the work of requests that gave up waiting (--timeout); closing it lets that
            # finish, then stops its workers
            queue.close(timeout=self.config.timeout)
            self.metrics.queue_depth.remove(victim.name)
            self.metrics.unloads.labels(victim.name).inc()
            log.info("unloaded %s (the least recently used; --max-loaded %d)", victim.name, bound)
            gc.collect()  # the weights go now, not at some later collection

    # --- holding models (on the event loop) ----------------------------------------------

    async def acquire(self, name: str) -> ServedModel:
        """The model called ``name``, loaded (off the event loop, once however many requests
        ask at once) if it is not; held (never unloaded) until ``release``."""
        entry = self.entry(name)
        with self._lock:
            entry.users += 1
            entry.last_used = time.monotonic()
            if entry.model is not None:
                return entry.model
            if entry.loading is None:
                try:
                    entry.loading = self._loads.submit(self._load_for_request, entry)
                except RuntimeError:  # the loader is shut down
                    entry.users -= 1
                    raise ServeError(503, "the server is shutting down") from None
            pending = entry.loading
        try:
            await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(pending)), self.config.timeout
            )
        except TimeoutError:
            self.release(name)
            raise ServeError(
                503,
                f"model {name} is still loading (over --timeout {self.config.timeout:g} s); "
                "try again",
                headers={"Retry-After": "5"},
            ) from None
        except QueueClosed as e:
            self.release(name)
            raise ServeError(503, str(e), headers={"Retry-After": "5"}) from None
        except BaseException as e:
            self.release(name)
            if not isinstance(e, Exception):  # the request was cancelled
                raise
            log.error("could not load %s: %s: %s", name, type(e).__name__, e)
            raise ServeError(500, self.shown(f"model {name} could not be loaded: {e}")) from None
        return entry.model

    def release(self, name: str) -> None:
        """One holder of ``name`` less; past ``--max-loaded``, the least recently used model
        no request holds is then unloaded (on the loader thread)."""
        entry = self.entries[name]
        with self._lock:
            entry.users -= 1
            over = self.config.max_loaded and len(self.models) > self.config.max_loaded
        if over and entry.users == 0:
            try:
                self._loads.submit(self._make_room)
            except RuntimeError:  # shut down: nothing to make room for
                pass

    @asynccontextmanager
    async def holding(self, name: str):
        """``async with registry.holding(name) as model``: the model, loaded and held."""
        model = await self.acquire(name)
        try:
            yield model
        finally:
            self.release(name)

    async def hold(self, name: str) -> ServedModel:
        """The model called ``name``, held until the request's answer is sent
        (``HeldModels``; outside a request, not held)."""
        model = await self.acquire(name)
        held = _held.get()
        if held is None:
            self.release(name)
        else:
            held.append(lambda: self.release(name))
        return model

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
        self._loads.shutdown(wait=True)  # the loads asked for fail at once (closing)
        for queue in list(self.queues.values()):
            queue.close(timeout=self.config.timeout)
        gc.unfreeze()  # a process serving again (a test's) collects them as before

    @property
    def shown_error(self) -> str | None:
        """``error`` as clients read it (``/health``, which takes no key, and every route):
        without the host's directories (``without_paths``), a model's directory as the
        server was given it (relative too) written as its last part."""
        return None if self.error is None else self.shown(self.error)

    def shown(self, message: str) -> str:
        """``message`` without the host's directories (see ``shown_error``)."""
        given = [(spec.path, *spec.members, spec.cache_dir) for spec in self.specs]
        paths = {str(p) for group in given for p in group if p is not None}
        # a bare name ("model") shows nothing of the host, and may be a word of the message
        known = {p: Path(p).name for p in paths if os.sep in p.rstrip(os.sep)}
        return without_paths(message, known)

    def require_ready(self) -> None:
        if not self.ready.is_set():
            if self.error:
                raise ServeError(500, f"the models failed to load: {self.shown_error}")
            raise ServeError(503, "the models are still loading", headers={"Retry-After": "2"})

    def entry(self, name: str) -> Entry:
        """The model called ``name``, loaded or not; 404 naming the served ones."""
        self.require_ready()
        if name not in self.entries:
            raise ServeError(
                404, f"model {name!r} not found; served: {', '.join(self.entries)}", "model"
            )
        return self.entries[name]

    async def pick(self, name: str | None, family: str, route: str) -> ServedModel:
        """The model a request names, or the only one of ``family``: loaded, and held until
        the request's answer is sent."""
        return await self.hold(self.choose(name, family, route).name)

    def choose(self, name: str | None, family: str, route: str) -> Entry:
        """``pick``'s model, not loaded: the one a request names, or the only one of
        ``family``."""
        self.require_ready()
        if name is not None:
            entry = self.entry(name)
            if entry.family != family:
                raise ServeError(
                    422,
                    f"model {name!r} is {entry.family}; {route} needs "
                    f"{'an' if family[0] in 'aeiou' else 'a'} {family} model",
                    "model",
                )
            return entry
        fits = [e for e in self.entries.values() if e.family == family]
        if route == "/v1/classify":
            fits = [e for e in fits if e.is_classifier]
        if len(fits) == 1:
            return fits[0]
        if not fits:
            raise ServeError(404, f"no {family} model is served for {route}", "model")
        raise ServeError(
            422,
            f"model: required, {len(fits)} models fit ({', '.join(e.name for e in fits)})",
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
        queue = self.queues.get(model.name)
        if queue is None or self.models.get(model.name) is not model:  # held by none: unloaded
            raise ServeError(
                503, f"model {model.name} was unloaded; try again", headers={"Retry-After": "1"}
            )
        try:
            return queue.submit(items, run, key)
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
