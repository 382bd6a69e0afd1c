"""The model config: sizes and variants of a Transformer, and the named presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from aiayn.config.fields import _check_choice, _check_float, _check_int, from_dict

POS_ENCODINGS = ("sinusoidal", "learned")
TIE_MODES = ("none", "decoder", "all")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swish")
POOLINGS = ("max", "mean", "first")
POOLERS = ("none", "tanh")
FAMILIES = ("encoder-decoder", "encoder-only", "decoder-only")
# aiayn's special token ids, the same in every model and tokenizer (an imported vocabulary is
# permuted onto them, ``aiayn.data.vocab_map``); a model reads them from its config.
PAD, UNK, BOS, EOS, MASK = 0, 1, 2, 3, 4
# The ModelConfig fields that decide a model's shapes or outputs. A saved config.json must give
# every one of them: a missing key would silently take its default (a model with 4 heads read
# as one with 8). The dropout rates only act in training; fields added later keep their
# defaults, so that directories saved before them still load.
ARCHITECTURE_KEYS = (
    "family", "vocab_size", "src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff",
    "n_encoder_layers", "n_decoder_layers", "max_len", "norm_first", "pos_encoding",
    "tie_embeddings", "activation", "layer_norm_eps", "pad_id", "n_classes", "pooling",
)  # fmt: skip

# The fields a model started from another (``train.init_from``) may change: dropout, and a
# classifier's head over a pretrained encoder. Every other field is the model's own.
FINE_TUNE_KEYS = (
    "n_classes", "pooling", "pooler", "dropout", "attention_dropout", "embedding_dropout",
)  # fmt: skip


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and variants of a Transformer (Vaswani et al. 2017, Table 3).

    ``vocab_size`` is the shared vocabulary; ``src_vocab_size`` / ``tgt_vocab_size`` override it
    for an encoder-decoder with separate vocabularies. ``tie_embeddings``: "none"; "decoder"
    (decoder input embedding = pre-softmax weights, Press & Wolf 2017); "all" (also the source
    embedding, as in §3.4, which needs a shared vocabulary).

    The defaults are the paper's model. The other fields describe the variants that pretrained
    checkpoints use (BERT, GPT-2, Marian; see ``aiayn.interop.hf``):
    ``activation`` of the feed-forward block: relu (§3.3), gelu (exact, BERT), gelu_tanh (the
    tanh approximation, GPT-2) or swish (x * sigmoid(x), Marian); ``embed_scale``: token
    embeddings times sqrt(d_model) (§3.4), off for BERT and GPT-2; ``embedding_layer_norm``:
    LayerNorm over the summed embeddings (BERT); ``n_token_types``: a token-type (segment)
    embedding table whose type 0 is added to every token (BERT), 0 = none;
    ``final_logits_bias``: a bias on the output logits (Marian, BERT's masked-LM head); -inf
    there marks an id the model never produces; ``pooler``: classify passes the pooled state
    through a dense layer and tanh before the classifier (BERT's pooler), or not ("none");
    ``mlm_activation``: the activation of the encoder-only masked-LM head (dense, activation,
    LayerNorm; one of ``activation``'s choices), exact GELU in Phuong & Hutter 2022, Alg. 9,
    the feed-forward block's own in BERT (its ``hidden_act``); ``source_bos`` /
    ``source_eos``: an encoder-decoder reads each source with bos before it / eos after it
    (aiayn and Marian end sources with eos; OpenNMT-py's models read them bare, as
    CTranslate2's ``add_source_bos`` / ``add_source_eos`` say).
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
    embed_scale: bool = True
    embedding_layer_norm: bool = False
    n_token_types: int = 0
    final_logits_bias: bool = False
    pooler: str = "none"
    mlm_activation: str = "gelu"
    source_bos: bool = False
    source_eos: bool = True

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
        for name in (
            "embed_scale", "embedding_layer_norm", "final_logits_bias", "source_bos", "source_eos",
        ):  # fmt: skip
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        _check_int("n_token_types", self.n_token_types, 0)
        _check_choice("pooler", self.pooler, POOLERS)
        _check_choice("mlm_activation", self.mlm_activation, ACTIVATIONS)
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

    @property
    def bos_id(self) -> int:
        """The token a decoder starts from."""
        return BOS

    @property
    def eos_id(self) -> int:
        """The token that ends a sequence (appended to every source)."""
        return EOS

    @property
    def source_frame(self) -> tuple[list[int], list[int]]:
        """The ids an encoder-decoder reads before and after each source's tokens."""
        return [BOS] if self.source_bos else [], [EOS] if self.source_eos else []

    @property
    def max_positions(self) -> int | None:
        """The most positions the model can encode: ``max_len`` for a learned table; None
        for sinusoids (their table extends to any length, §3.5)."""
        return self.max_len if self.pos_encoding == "learned" else None

    def clamp_length(self, length):
        """``length`` (an int or a tensor of lengths) cut to ``max_positions``: how long a
        decoded sequence may grow."""
        limit = self.max_positions
        if limit is None:
            return length
        return length.clamp(max=limit) if hasattr(length, "clamp") else min(length, limit)

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
