"""``Entry``: one served model in the registry (``aiayn.serve.registry``), loaded or not."""

from __future__ import annotations

from concurrent.futures import Future

from aiayn.serve.batching import BatchQueue
from aiayn.serve.models import ModelFacts, ModelSpec, ServedModel


class Entry:
    """One served model: its spec and what its directory says (read at start), and, while
    it is loaded, its API object (``model``) and batching queue. ``users``: requests holding
    it (or waiting for its load); a model with users is never unloaded."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec, self.name = spec, spec.name
        self.facts: ModelFacts | None = None
        self.model: ServedModel | None = None
        self.queue: BatchQueue | None = None
        self.users = 0
        self.last_used = 0.0
        self.loading: Future | None = None
        self.loads = 0
        self.load_seconds: float | None = None

    # what the routes read of a model, loaded or not
    @property
    def family(self) -> str:
        return self.facts.family

    @property
    def languages(self) -> tuple[str, ...] | None:
        return self.facts.languages

    @property
    def labels(self) -> list[str] | None:
        return None if self.facts.labels is None else list(self.facts.labels)

    @property
    def is_translator(self) -> bool:
        return self.facts.is_translator

    @property
    def is_classifier(self) -> bool:
        return self.facts.is_classifier

    def describe(self) -> dict:
        """``/v1/models``' entry: the loaded model's description, or what its directory says
        (``parameters``, ``engine`` and ``engines`` null until it loads), with ``loaded``,
        ``loads`` (times loaded) and ``load_seconds`` (the last load's time)."""
        status = {"loaded": self.model is not None, "loads": self.loads}
        status["load_seconds"] = None if self.load_seconds is None else round(self.load_seconds, 3)
        if self.model is not None:
            return {**self.model.describe(), **status}
        spec, facts = self.spec, self.facts
        return {
            "id": self.name,
            "object": "model",
            "created": facts.created,
            "owned_by": "aiayn",
            "family": facts.family,
            "parameters": None,
            "vocab_size": facts.vocab_size,
            "max_len": facts.max_len,
            "languages": list(facts.languages) if facts.languages else None,
            "labels": self.labels,
            "quantization": facts.quantization,
            "engine": None,
            "engines": None,
            "device": spec.device,
            "dtype": spec.dtype,
            "path": str(spec.path),
            "ensemble": [str(p) for p in (spec.path, *spec.members)] if spec.members else None,
            **status,
        }
