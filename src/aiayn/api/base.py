"""What every family's API object shares: the model, its tokenizer and what its directory
says about it (``run.json``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import torch

from aiayn.api.device import dtype_name, placement
from aiayn.config import ModelConfig
from aiayn.model.quantize import stored_weights
from aiayn.modeldir import ModelDir


class LoadedModel:
    """A model in eval mode with its tokenizer, checked against each other.

    ``config`` is the model's ``ModelConfig``: its special ids and length limit
    (``pad_id``, ``bos_id``, ``eos_id``, ``max_len``, ``max_positions``) are read there.
    """

    family: ClassVar[str] = ""

    def __init__(self, model, tokenizer, path: Path | str | None = None, run: dict | None = None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.path = None if path is None else Path(path)
        self.run = run or {}

    @classmethod
    def from_dir(
        cls,
        path: ModelDir | Path | str,
        *,
        quantize: str | None = None,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype = "float32",
    ):
        """Load a model directory (a path or an opened ``ModelDir``; ``aiayn.load`` checks its
        family first) onto ``device`` with its floating weights in ``dtype``
        (``aiayn.api.device``)."""
        directory = ModelDir.open(path)
        where = placement(device, dtype, quantize=quantize or directory.quantization)
        model, tokenizer = directory.load(where.device, quantize=quantize, dtype=where.dtype)
        return cls(model, tokenizer, directory.path, directory.run)

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> str:
        """The floating weights' dtype: "float32", "bfloat16" or "float16"."""
        floats = (p.dtype for p in self.model.parameters() if p.is_floating_point())
        return dtype_name(next(floats, torch.float32))

    @property
    def max_text_tokens(self) -> int:
        """The longest text (in tokens, before eos) the model reads whole."""
        return self.config.max_len - 1

    @property
    def parameters(self) -> int:
        """Numbers the model holds (int8 weights included)."""
        return stored_weights(self.model)

    @property
    def quantization(self) -> str | None:
        """The quantization method ("int8"), or None for float weights."""
        return (getattr(self.model, "quantization", None) or {}).get("method")

    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens of each text as the model reads it (before eos)."""
        return [len(ids) for ids in self.tokenizer.encode(list(texts))]

    def __repr__(self) -> str:
        where = f" from {self.path}" if self.path else ""
        return f"<{type(self).__name__} {self.config.family}{where}>"
