"""Model directories: ``config.json`` + ``model.safetensors`` (+ the tokenizer, ``run.json``).

A directory is read in one place, ``ModelDir``: opened once, it hands out the model, the
tokenizer, what ``run.json`` says and a fingerprint of its files; the API, the CTranslate2
engine and its cache, the exports, ``evaluate`` and the server take that value instead of
reading paths again. config.json and run.json are read once per value, and the weights are
hashed once (then read once more for each model built from them). Loading needs nothing but
the directory, and trusts nothing in it:

* ``config.json`` must give every architecture key (``ARCHITECTURE_KEYS``: the fields that
  decide shapes or outputs); a missing one is an error naming it, never a default;
* it records the SHA-256 of the weights file, checked at load (a changed byte is an error
  naming the file); a directory written before the hash existed loads unchecked;
* the weights file carries the architecture it was saved with, so a ``config.json`` edited or
  swapped for another model's is caught even when the shapes agree (``weights``);
* the tokenizer must have as many tokens as the model's embedding has rows
  (``tokenizer_files`` says which tokenizer a directory holds);
* an int8 model's ``config.json`` records its ``quantization`` (method, include_output), and
  loading rebuilds the same int8 layers (``aiayn.model.quantize``) before filling them.

A command that writes a whole directory (import, export, quantize, average) writes it through
``aiayn.fileio.replace_directory``. The functions below ``ModelDir`` (``load_config``,
``load_model_dir``, ``load_model_and_tokenizer``, ...) are one-line uses of it.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import torch
from torch import nn

from aiayn.config import ARCHITECTURE_KEYS, ModelConfig, RunConfig
from aiayn.errors import UserError
from aiayn.fileio import file_sha256, read_json_object, write_json
from aiayn.model.quantize import check_method
from aiayn.modeldir import provenance
from aiayn.modeldir.tokenizer_files import (
    has_tokenizer,
    load_tokenizer,
    tokenizer_file,
    tokenizer_paths,
)
from aiayn.modeldir.weights import (
    CONFIG_FILE,
    CONFIG_METADATA_KEY,
    HASH_KEY,
    WEIGHTS_FILE,
    load_weights,
    recorded_sha256,
    save_model_dir,
    save_quantized,
    untied_state_dict,
    weights_sha256,
)

RUN_FILE = "run.json"


class ModelDir:
    """One model directory, read once: ``ModelDir(path)`` reads and checks ``config.json``
    (a ``UserError`` naming the file otherwise); the rest is read when first asked for.

    ``config``: its ``ModelConfig``; ``run``: ``run.json`` ({} when absent); ``quantization``:
    the method it was saved quantized with ("int8") or None; ``describe_weights()``: which
    weights it holds, in words (``provenance``); ``tokenizer_path``: its tokenizer file;
    ``model(...)``, ``tokenizer()`` and ``load(...)`` (both, checked against each other);
    ``weights_sha256()`` (checked against the recorded one) and ``fingerprint()`` (what a
    conversion of it depends on).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.data = _config_file(self.path)  # config.json, parsed once
        self.config = _model_config(self.data, self.path / CONFIG_FILE)
        self._saved_quantization = _saved_quantization(self.data, self.path / CONFIG_FILE)
        self._weights_sha256: str | None = None  # hashed once, when first needed

    @classmethod
    def open(cls, path: ModelDir | Path | str) -> ModelDir:
        """``path`` as a ``ModelDir`` (itself when it already is one)."""
        return path if isinstance(path, ModelDir) else cls(path)

    def __repr__(self) -> str:
        return f"ModelDir({str(self.path)!r})"

    @property
    def quantization(self) -> str | None:
        """The quantization method (``"int8"``) the directory was saved with; None: float."""
        saved = self._saved_quantization
        return None if saved is None else saved["method"]

    @cached_property
    def run(self) -> dict:
        """``run.json`` (the run config and extras saved with the model), or {} if absent."""
        return read_run_json(self.path)

    @property
    def tokenizer_path(self) -> Path:
        """The tokenizer file (for an imported tokenizer, its ``vocab_map.json``)."""
        return tokenizer_file(self.path)

    @property
    def has_tokenizer(self) -> bool:
        return has_tokenizer(self.path)

    def tokenizer(self):
        """The directory's tokenizer (``tokenizer_files.load_tokenizer``)."""
        return load_tokenizer(self.path)

    def weights_sha256(self) -> str:
        """The weights file's SHA-256, checked against the one config.json records."""
        if self._weights_sha256 is None:
            self._weights_sha256 = weights_sha256(self.data, self.path)
        return self._weights_sha256

    def model(
        self,
        device: str | torch.device = "cpu",
        quantize: str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> nn.Module:
        """Rebuild the model, in eval mode, floating weights in ``dtype`` (float32 by default;
        on a CPU, linear weights laid out column-major for decoding: ``aiayn.model.layout``).

        ``quantize`` ("int8") quantizes a float model's linear layers after loading
        (``aiayn.model.quantize``); a directory saved quantized loads quantized whatever it
        says.
        """
        try:
            check_method(quantize)
        except ValueError as e:
            raise UserError(str(e)) from None
        saved = self._saved_quantization
        if (quantize or saved) and torch.device(device).type != "cpu":
            raise UserError(f"{self.path}: int8 layers run on the CPU only, not on {device}")
        if (quantize or saved) and dtype != torch.float32:
            raise UserError(f"{self.path}: int8 layers compute in float32, not {dtype}")
        path = self.path / WEIGHTS_FILE
        if not path.is_file():
            raise UserError(f"{path}: no weights file in the model directory")
        if recorded_sha256(self.data) is not None:
            self.weights_sha256()
        return load_weights(self.path, self.config, saved, device, quantize, dtype)

    def load(
        self,
        device: str | torch.device = "cpu",
        quantize: str | None = None,
        dtype: torch.dtype = torch.float32,
    ):
        """(model, tokenizer), checked against each other."""
        model = self.model(device, quantize=quantize, dtype=dtype)
        tokenizer = self.tokenizer()
        check_vocabulary(model.config, tokenizer, str(self.tokenizer_path))
        return model, tokenizer

    def describe_weights(self) -> str | None:
        """Which weights these are, in words: the step, the checkpoints averaged, int8
        (``provenance``: what run.json records); None when nothing says."""
        return provenance.describe(self.run, self._saved_quantization)

    def tokenizer_sha256(self) -> dict[str, str]:
        """{file name: SHA-256} of every file of the directory's tokenizer."""
        return {p.name: file_sha256(p) for p in tokenizer_paths(self.path)}

    def fingerprint(self) -> dict:
        """What anything made from this directory depends on: the weights' SHA-256, the
        model's config and the tokenizer's files' digests."""
        return {
            "weights_sha256": self.weights_sha256(),
            "model": self.data.get("model"),
            "tokenizer_sha256": self.tokenizer_sha256(),
        }


def _config_file(directory: Path) -> dict:
    directory = Path(directory)
    path = directory / CONFIG_FILE
    if not directory.is_dir():
        what = "is a file" if directory.exists() else "does not exist"
        raise UserError(f"{directory}: {what}; a model directory holds {CONFIG_FILE} and weights")
    if not path.is_file():
        raise UserError(f"{path}: no model config here (is {directory} a model directory?)")
    data = read_json_object(path, "model config")
    if not isinstance(data.get("model"), dict):
        raise UserError(f"{path}: missing the 'model' table (a JSON object of config fields)")
    return data


def _model_config(data: dict, path: Path) -> ModelConfig:
    """The ``ModelConfig`` of a parsed config.json ``data`` read from ``path``."""
    fields = data["model"]
    missing = [k for k in ARCHITECTURE_KEYS if k not in fields]
    if missing:
        raise UserError(
            f"{path}: missing architecture key(s) {', '.join(missing)} in the 'model' table; "
            "they decide the model's shapes and outputs and have no safe default"
        )
    try:
        return ModelConfig.from_dict(fields)
    except (TypeError, ValueError) as e:
        raise UserError(f"{path}: {e}") from None


def _saved_quantization(data: dict, path: Path) -> dict | None:
    """The quantization config.json ``data`` (read from ``path``) records; None: float."""
    saved = data.get("quantization")
    if saved is None:
        return None
    if not isinstance(saved, dict) or not isinstance(saved.get("include_output", True), bool):
        raise UserError(
            f"{path}: 'quantization' must be a table with method and include_output (true/false)"
        )
    try:
        check_method(saved.get("method"), flag="quantization.method")
    except ValueError as e:
        raise UserError(f"{path}: {e}") from None
    return saved


def check_vocabulary(config: ModelConfig, tokenizer, where: str) -> None:
    """The tokenizer must have exactly the rows of the model's embeddings (a tokenizer with
    a source vocabulary of its own says its size in ``source_vocab_size``)."""
    sizes = {config.source_vocab, config.target_vocab}
    source = getattr(tokenizer, "source_vocab_size", tokenizer.vocab_size)
    if (config.source_vocab, config.target_vocab) != (source, tokenizer.vocab_size):
        if source != tokenizer.vocab_size:
            raise UserError(
                f"{where}: the tokenizer has {source} source and {tokenizer.vocab_size} "
                f"target tokens, but the model's are {config.source_vocab} and "
                f"{config.target_vocab}: they belong to different models"
            )
        want = " / ".join(str(n) for n in sorted(sizes))
        raise UserError(
            f"{where}: the tokenizer has {tokenizer.vocab_size} tokens, but the model's "
            f"vocab_size is {want}: they belong to different models"
        )


def read_run_json(directory: Path) -> dict:
    """``directory/run.json`` (the run config and extras saved with a model), or {} if absent."""
    path = Path(directory) / RUN_FILE
    if not path.exists():
        return {}
    data = read_json_object(path, "run config")
    for key in ("data", "model", "train"):
        if key in data and not isinstance(data[key], dict):
            raise UserError(f"{path}: '{key}' must be a JSON object")
    return data


def save_trained_model(
    directory: Path, model, tokenizer, run: RunConfig, dtype=None, extra=None
) -> None:
    """A self-contained model directory: weights, config, tokenizer and the run config
    (``run.json``, with ``extra``: a summary, labels, ...)."""
    directory = Path(directory)
    save_model_dir(directory, model, dtype=dtype)
    tokenizer.save(directory)
    write_json(directory / RUN_FILE, {**run.to_dict(), **(extra or {})})


def load_config(directory: Path | str) -> ModelConfig:
    """The ``ModelConfig`` in ``directory/config.json``; every architecture key must be there."""
    return ModelDir(directory).config


def saved_quantization(directory: Path | str) -> str | None:
    """The quantization method (``"int8"``) a directory was saved with; None: float weights."""
    return ModelDir(directory).quantization


def load_model_dir(
    directory: Path | str,
    device: str | torch.device = "cpu",
    quantize: str | None = None,
    dtype: torch.dtype = torch.float32,
) -> nn.Module:
    """Rebuild the model saved in ``directory`` (``ModelDir.model``)."""
    return ModelDir(directory).model(device, quantize=quantize, dtype=dtype)


def load_model_and_tokenizer(
    directory: Path | str,
    device: str | torch.device = "cpu",
    quantize: str | None = None,
    dtype: torch.dtype = torch.float32,
):
    """(model, tokenizer) of a model directory, checked against each other."""
    return ModelDir(directory).load(device, quantize=quantize, dtype=dtype)


__all__ = [
    "CONFIG_FILE",
    "CONFIG_METADATA_KEY",
    "HASH_KEY",
    "RUN_FILE",
    "WEIGHTS_FILE",
    "ModelDir",
    "check_vocabulary",
    "load_config",
    "load_model_and_tokenizer",
    "load_model_dir",
    "read_run_json",
    "save_model_dir",
    "save_quantized",
    "save_trained_model",
    "saved_quantization",
    "untied_state_dict",
]
