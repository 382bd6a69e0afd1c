"""The run config: model + data + train, read from a TOML file with ``--set`` overrides."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiayn.config.fields import _check_choice, _check_float, _check_int, from_dict
from aiayn.config.model import FINE_TUNE_KEYS, ModelConfig
from aiayn.errors import UserError
from aiayn.fileio import read_json_object, read_text

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
    # cosine and linear reach 0 at the run's last step (max_steps, else the end of max_epochs;
    # with max_minutes, the step the time runs out at if sooner, estimated from the pace)
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
    # auto: bf16 on a GPU that has it, else fp16; on a CPU bf16 where it has bf16 units, else fp32
    precision: str = "auto"  # auto | fp32 | bf16 | fp16
    compile: bool = False  # torch.compile the model for training (opt-in)
    # keep each layer's input only and recompute its activations in the backward pass:
    # activation memory of one layer instead of all, for one more forward pass
    activation_checkpointing: bool = False
    # torch's deterministic algorithms (torch.use_deterministic_algorithms): on a GPU, a run
    # and its resume then give the same weights bit for bit, for some speed (CUDA's atomic
    # sums, e.g. in attention's backward pass, add in an order that varies from run to run)
    deterministic: bool = False
    # also write the logged metrics as TensorBoard event files in RUN/tensorboard
    tensorboard: bool = False
    # every this many seconds, give the C heap's free pages back to the system (glibc's
    # malloc_trim; aiayn.train.heap): less resident memory for a few % of step time; 0 = off
    trim_heap_every: float = 0.0

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
        if not isinstance(self.tensorboard, bool):
            raise ValueError(f"train.tensorboard must be true or false, got {self.tensorboard!r}")
        if not isinstance(self.deterministic, bool):
            raise ValueError(
                f"train.deterministic must be true or false, got {self.deterministic!r}"
            )
        if not isinstance(self.activation_checkpointing, bool):
            raise ValueError(
                "train.activation_checkpointing must be true or false, got "
                f"{self.activation_checkpointing!r}"
            )
        _check_float("train.beta1", self.beta1, 0.0, 1.0, high_open=True)
        _check_float("train.beta2", self.beta2, 0.0, 1.0, high_open=True)
        _check_float("train.eps", self.eps, 0.0, 1.0)
        _check_float("train.weight_decay", self.weight_decay, 0.0, 1.0)
        _check_float("train.label_smoothing", self.label_smoothing, 0.0, 1.0, high_open=True)
        _check_float("train.clip_norm", self.clip_norm, 0.0, 1e6)
        _check_float("train.max_minutes", self.max_minutes, 0.0, 1e6)
        _check_float("train.trim_heap_every", self.trim_heap_every, 0.0, 3600.0)
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
    """Read a TOML run config, apply ``--set`` overrides, take the [model] keys it leaves out
    from ``train.init_from``'s model (``with_init_from_model``), validate. Errors name the
    file."""
    import tomllib

    data: dict[str, Any] = {}
    if path is not None:
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
        return RunConfig.from_dict(with_init_from_model(data))
    except (TypeError, ValueError) as e:
        raise UserError(f"{path or 'config'}: {e}") from None


def with_init_from_model(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a run config's tables) with the [model] keys it leaves out taken from the
    model directory ``train.init_from`` starts from (its config.json), so that a fine-tune's
    config gives only what it changes: the architecture is the model's own (a key given,
    by the table or its preset, still decides, and must agree with the model). The keys
    a fine-tune may change (``FINE_TUNE_KEYS``: dropout, a classifier's head) keep their
    defaults unless given. Without ``train.init_from``, or where its config.json cannot be
    read (the trainer names the problem), ``data`` is returned unchanged."""
    train = data.get("train")
    init_from = train.get("init_from") if isinstance(train, dict) else None
    model = data.get("model", {})
    if not isinstance(init_from, str) or not init_from or not isinstance(model, dict):
        return data
    path = Path(init_from) / "config.json"
    try:
        saved = read_json_object(path, "model config").get("model") if path.is_file() else None
    except UserError:
        return data
    if not isinstance(saved, dict):
        return data
    name = model.get("preset")
    preset = ModelConfig.PRESETS.get(name, {}) if isinstance(name, str) else {}
    known = {f.name for f in dataclasses.fields(ModelConfig)} - set(FINE_TUNE_KEYS)
    inherited = {
        k: v for k, v in saved.items() if k in known and k not in model and k not in preset
    }
    return {**data, "model": {**inherited, **model}}
