"""Configuration dataclasses and the named presets.

Every config is a frozen dataclass validated in ``__post_init__``; a bad value raises
``ValueError`` naming the field and what is allowed. Configs round-trip through plain dicts
(JSON / TOML), and unknown keys are errors rather than silently ignored.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

POS_ENCODINGS = ("sinusoidal", "learned")
TIE_MODES = ("none", "decoder", "all")
ACTIVATIONS = ("relu", "gelu")
POOLINGS = ("max", "mean", "first")
FAMILIES = ("encoder-decoder", "encoder-only", "decoder-only")


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}"
        raise ValueError(f"{name} must be >= {low}{upper}, got {value}")


def _check_float(name: str, value: Any, low: float, high: float, high_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    too_high = value >= high if high_open else value > high
    if value < low or too_high:
        bracket = ")" if high_open else "]"
        raise ValueError(f"{name} must be in [{low}, {high}{bracket}, got {value}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def from_dict(cls, data: dict[str, Any], where: str = ""):
    """Build dataclass ``cls`` from ``data``; unknown keys raise ``ValueError`` naming them."""
    if not isinstance(data, dict):
        raise ValueError(
            f"{where or cls.__name__} must be a table of keys, got {type(data).__name__}"
        )
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ValueError(
            f"unknown key(s) {', '.join(prefix + k for k in unknown)} for {cls.__name__}; "
            f"allowed: {', '.join(sorted(names))}"
        )
    return cls(**data)


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and variants of a Transformer (Vaswani et al. 2017, Table 3).

    ``vocab_size`` is the shared vocabulary; ``src_vocab_size`` / ``tgt_vocab_size`` override it
    for an encoder-decoder with separate vocabularies. ``tie_embeddings``: "none"; "decoder"
    (decoder input embedding = pre-softmax weights, Press & Wolf 2017); "all" (also the source
    embedding, as in §3.4, which needs a shared vocabulary).
    """

    family: str = "encoder-decoder"
    vocab_size: int = 37000
    src_vocab_size: int | None = None
    tgt_vocab_size: int | None = None
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    embedding_dropout: float = 0.1
    max_len: int = 1024
    norm_first: bool = False
    pos_encoding: str = "sinusoidal"
    tie_embeddings: str = "all"
    activation: str = "relu"
    layer_norm_eps: float = 1e-5
    pad_id: int = 0
    n_classes: int = 0
    pooling: str = "max"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(
            vocab_size=64, d_model=32, n_heads=2, d_ff=64, n_encoder_layers=2,
            n_decoder_layers=2, max_len=128,
        ),
        "small": dict(
            vocab_size=8000, d_model=256, n_heads=4, d_ff=1024, n_encoder_layers=3,
            n_decoder_layers=3, max_len=256,
        ),
        "base": dict(),
        "big": dict(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3, embedding_dropout=0.3),
    }  # fmt: skip

    def __post_init__(self) -> None:
        _check_choice("family", self.family, FAMILIES)
        _check_int("vocab_size", self.vocab_size, 1)
        for name in ("src_vocab_size", "tgt_vocab_size"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), 1)
        _check_int("d_model", self.d_model, 1)
        _check_int("n_heads", self.n_heads, 1)
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        _check_int("d_ff", self.d_ff, 1)
        _check_int("n_encoder_layers", self.n_encoder_layers, 0)
        _check_int("n_decoder_layers", self.n_decoder_layers, 0)
        for name in ("dropout", "attention_dropout", "embedding_dropout"):
            _check_float(name, getattr(self, name), 0.0, 1.0, high_open=True)
        _check_int("max_len", self.max_len, 1)
        if not isinstance(self.norm_first, bool):
            raise ValueError(f"norm_first must be true or false, got {self.norm_first!r}")
        _check_choice("pos_encoding", self.pos_encoding, POS_ENCODINGS)
        _check_choice("tie_embeddings", self.tie_embeddings, TIE_MODES)
        _check_choice("activation", self.activation, ACTIVATIONS)
        _check_float("layer_norm_eps", self.layer_norm_eps, 0.0, 1.0)
        _check_int("pad_id", self.pad_id, 0, min(self.source_vocab, self.target_vocab) - 1)
        _check_int("n_classes", self.n_classes, 0)
        if self.n_classes == 1:
            raise ValueError("n_classes must be 0 (no classifier) or >= 2, got 1")
        _check_choice("pooling", self.pooling, POOLINGS)
        if self.tie_embeddings == "all" and self.source_vocab != self.target_vocab:
            raise ValueError(
                "tie_embeddings='all' needs one shared vocabulary, but src_vocab_size="
                f"{self.source_vocab} and tgt_vocab_size={self.target_vocab}; "
                "use 'decoder' or 'none'"
            )

    @property
    def source_vocab(self) -> int:
        return self.src_vocab_size if self.src_vocab_size is not None else self.vocab_size

    @property
    def target_vocab(self) -> int:
        return self.tgt_vocab_size if self.tgt_vocab_size is not None else self.vocab_size

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """The named preset (tiny, small, base, big) with optional field overrides."""
        if name not in cls.PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(cls.PRESETS)}")
        return from_dict(cls, {**cls.PRESETS[name], **overrides}, where="model")

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        return from_dict(cls, data, where="model")


__all__ = ["ModelConfig", "from_dict"]
