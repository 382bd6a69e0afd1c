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

from aiayn.errors import UserError

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


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}"
        raise UserError(f"{name} must be >= {low}{upper}, got {value}")


def _check_float(name: str, value: Any, low: float, high: float, high_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise UserError(f"{name} must be a number, got {value!r}")
    too_high = value >= high if high_open else value > high
    if value < low or too_high:
        bracket = ")" if high_open else "]"
        raise UserError(f"{name} must be in [{low}, {high}{bracket}, got {value}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UserError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def from_dict(cls, data: dict[str, Any], where: str = ""):
    """Build dataclass ``cls`` from ``data``; unknown keys raise ``ValueError`` naming them."""
    if not isinstance(data, dict):
        raise UserError(
            f"{where or cls.__name__} must be a table of keys, got {type(data).__name__}"
        )
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        prefix = f"{where}." if where else ""
        raise UserError(
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

    The defaults are the paper's model. The other fields describe the variants that pretrained
    checkpoints use (BERT, GPT-2, Marian; see ``aiayn.interop.hf``):
    ``activation`` of the feed-forward block: relu (§3.3), gelu (exact, BERT), gelu_tanh (the
    tanh approximation, GPT-2) or swish (x * sigmoid(x), Marian); ``embed_scale``: token
    embeddings times sqrt(d_model) (§3.4), off for BERT and GPT-2; ``embedding_layer_norm``:
    LayerNorm over the summed embeddings (BERT); ``n_token_types``: a token-type (segment)
    embedding table whose type 0 is added to every token (BERT), 0 = none;
    ``final_logits_bias``: a bias on the output logits (Marian, BERT's masked-LM head); -inf
    there marks an id the model never produces; ``pooler``: classify passes the pooled state
    through a dense layer and tanh before the classifier (BERT's pooler), or not ("none").
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
        for name in ("embed_scale", "embedding_layer_norm", "final_logits_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        _check_int("n_token_types", self.n_token_types, 0)
        _check_choice("pooler", self.pooler, POOLERS)
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


TASKS = ("translation", "lm", "mlm", "classification")
SCHEDULES = ("inverse_sqrt", "constant", "cosine", "linear")
TOKENIZERS = ("bpe", "char")


@dataclass(frozen=True)
class DataConfig:
    """The task, where its corpus lives and how it is tokenized.

    ``translation``: a parallel corpus ``{split}.{src_lang,tgt_lang}.gz``; ``lm``: running text
    ``{split}.txt.gz`` cut into blocks of ``block_size`` tokens; ``classification`` and
    ``mlm``: labelled texts ``{split}.tsv.gz`` (``label<TAB>text``; mlm ignores the labels),
    each text truncated to ``max_len`` tokens.
    """

    task: str = "translation"
    corpus: str = "data/ding-de-en"
    src_lang: str = "de"
    tgt_lang: str = "en"
    extra_train: tuple[str, ...] = ()  # further splits of the corpus added to training
    train_repeat: int = 1  # copies of the train split per epoch (to weigh it against extras)
    tokenizer: str = "bpe"
    vocab_size: int = 8000  # BPE only; a character vocabulary is what the text holds
    max_len: int = 128  # training pairs with a longer side (in tokens) are dropped
    block_size: int = 256  # lm: tokens of context per training example
    mask_prob: float = 0.15  # mlm: share of tokens selected (80% mask, 10% random, 10% kept)
    lowercase: bool = False  # classification/mlm, BPE: the tokenizer folds case (kept in it)

    def __post_init__(self) -> None:
        if isinstance(self.extra_train, str) or not all(
            isinstance(x, str) and x for x in self.extra_train
        ):
            raise UserError(
                f"data.extra_train must be a list of split names, got {self.extra_train!r}"
            )
        object.__setattr__(self, "extra_train", tuple(self.extra_train))
        for name in ("corpus", "src_lang", "tgt_lang"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise UserError(
                    f"data.{name} must be a non-empty string, got {getattr(self, name)!r}"
                )
        _check_choice("data.task", self.task, TASKS)
        _check_choice("data.tokenizer", self.tokenizer, TOKENIZERS)
        _check_int("data.block_size", self.block_size, 2)
        _check_float("data.mask_prob", self.mask_prob, 0.0, 1.0)
        if not isinstance(self.lowercase, bool):
            raise ValueError(f"data.lowercase must be true or false, got {self.lowercase!r}")
        if self.lowercase and (
            self.tokenizer != "bpe" or self.task not in ("classification", "mlm")
        ):
            raise ValueError(
                "data.lowercase needs data.tokenizer = 'bpe' and data.task = "
                f"'classification' or 'mlm' (got {self.tokenizer!r}, {self.task!r})"
            )
        _check_int("data.vocab_size", self.vocab_size, 16)
        _check_int("data.train_repeat", self.train_repeat, 1)
        _check_int("data.max_len", self.max_len, 2)


@dataclass(frozen=True)
class TrainConfig:
    """The training recipe (Vaswani et al. 2017 §5; Phuong & Hutter 2022, Algorithm 11)."""

    max_tokens: int = 4096  # padded source or target tokens per batch
    accum_steps: int = 1
    lr_scale: float = 1.0  # multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    warmup: int = 4000
    # inverse_sqrt | constant | cosine | linear; for the last three lr_scale is the peak lr, and
    # cosine and linear reach 0 at the run's last step (max_steps, else the end of max_epochs)
    schedule: str = "inverse_sqrt"
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-9
    weight_decay: float = 0.0  # decoupled (AdamW); weight matrices and embeddings only
    label_smoothing: float = 0.1
    clip_norm: float = 0.0  # 0 = no clipping
    max_epochs: int = 100
    max_steps: int = 0  # 0 = no limit
    max_minutes: float = 0.0  # training wall-clock limit, 0 = none
    seed: int = 1
    log_every: int = 50
    valid_every: int = 0  # steps; 0 = once per epoch
    checkpoint_every: int = 1000
    keep_checkpoints: int = 5
    keep_best: str = (
        "loss"  # best/ holds the lowest valid loss | "accuracy": the highest (classifiers)
    )
    average_last: int = 0  # average the last K checkpoints into the final model (0 = off)
    threads: int = 0  # torch intra-op threads; 0 = torch's default
    init_from: str = ""  # a model directory to start from (its weights and tokenizer)
    device: str = "auto"  # auto (CUDA when present) | cpu | cuda
    precision: str = "auto"  # auto (bf16/fp16 on CUDA, fp32 on CPU) | fp32 | bf16 | fp16
    compile: bool = False  # torch.compile the model for training (opt-in)

    def __post_init__(self) -> None:
        for name in ("max_tokens", "accum_steps", "warmup", "max_epochs", "seed"):
            _check_int(f"train.{name}", getattr(self, name), 1)
        for name in ("max_steps", "valid_every", "keep_checkpoints", "average_last", "threads"):
            _check_int(f"train.{name}", getattr(self, name), 0)
        _check_int("train.log_every", self.log_every, 1)
        _check_int("train.checkpoint_every", self.checkpoint_every, 1)
        _check_float("train.lr_scale", self.lr_scale, 0.0, 1e6)
        _check_choice("train.schedule", self.schedule, SCHEDULES)
        _check_choice("train.keep_best", self.keep_best, ("loss", "accuracy"))
        _check_choice("train.device", self.device, ("auto", "cpu", "cuda"))
        _check_choice("train.precision", self.precision, ("auto", "fp32", "bf16", "fp16"))
        if not isinstance(self.compile, bool):
            raise ValueError(f"train.compile must be true or false, got {self.compile!r}")
        _check_float("train.beta1", self.beta1, 0.0, 1.0, high_open=True)
        _check_float("train.beta2", self.beta2, 0.0, 1.0, high_open=True)
        _check_float("train.eps", self.eps, 0.0, 1.0)
        _check_float("train.weight_decay", self.weight_decay, 0.0, 1.0)
        _check_float("train.label_smoothing", self.label_smoothing, 0.0, 1.0, high_open=True)
        _check_float("train.clip_norm", self.clip_norm, 0.0, 1e6)
        _check_float("train.max_minutes", self.max_minutes, 0.0, 1e6)
        if self.average_last > self.keep_checkpoints:
            raise ValueError(
                f"train.average_last ({self.average_last}) cannot exceed "
                f"train.keep_checkpoints ({self.keep_checkpoints})"
            )


@dataclass(frozen=True)
class RunConfig:
    """A whole run: model + data + train, as read from a TOML file."""

    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()

    def __post_init__(self) -> None:
        if self.train.keep_best == "accuracy" and self.data.task != "classification":
            raise ValueError(
                "train.keep_best = 'accuracy' needs data.task = 'classification' "
                f"(got {self.data.task!r}); use 'loss'"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        unknown = sorted(set(data) - {"model", "data", "train"})
        if unknown:
            raise ValueError(
                f"unknown section(s) {', '.join(unknown)}; allowed: model, data, train"
            )
        model = dict(data.get("model", {}))
        preset = model.pop("preset", None)
        model_config = (
            ModelConfig.preset(preset, **model) if preset else ModelConfig.from_dict(model)
        )
        return cls(
            model=model_config,
            data=from_dict(DataConfig, dict(data.get("data", {})), where="data"),
            train=from_dict(TrainConfig, dict(data.get("train", {})), where="train"),
        )


def parse_override(text: str) -> tuple[list[str], Any]:
    """``section.key=value`` to (["section", "key"], value); the value is read as TOML."""
    import tomllib

    if "=" not in text:
        raise UserError(f"--set {text!r}: expected section.key=value")
    key, raw = text.split("=", 1)
    path = key.strip().split(".")
    if len(path) != 2 or not all(path):
        raise UserError(f"--set {text!r}: the key must be section.key, e.g. train.lr_scale")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # a bare word: take it as a string
    return path, value


def load_run_config(path: str | None, overrides: list[str] = ()) -> RunConfig:
    """Read a TOML run config, apply ``--set`` overrides, validate. Errors name the file."""
    import tomllib
    from pathlib import Path

    data: dict[str, Any] = {}
    if path is not None:
        from aiayn.errors import read_text

        p = Path(path)
        if not p.is_file():
            raise UserError(f"{p}: config file not found")
        try:
            data = tomllib.loads(read_text(p, "config file"))
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"{p}: invalid TOML ({e})") from None
    for text in overrides:
        (section, key), value = parse_override(text)
        data.setdefault(section, {})[key] = value
    try:
        return RunConfig.from_dict(data)
    except (TypeError, ValueError) as e:
        raise UserError(f"{path or 'config'}: {e}") from None


__all__ = ["DataConfig", "ModelConfig", "RunConfig", "TrainConfig", "from_dict", "load_run_config"]
