"""Model directories: ``config.json`` + ``model.safetensors`` (+ the tokenizer, when there is one).

Tied weights are stored once; every file is written atomically (temporary file, fsync,
rename), so an interrupted save leaves the previous version intact. Loading needs nothing but
the directory.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from aiayn.config import ModelConfig
from aiayn.model import build_model

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)``, fsync, then rename over ``path``: all or nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
    try:
        write(Path(tmp))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, lambda p: p.write_text(json.dumps(data, indent=2) + "\n"))


def untied_state_dict(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The state dict with each shared tensor kept once, and {alias: stored name} for the rest."""
    tensors: dict[str, torch.Tensor] = {}
    tied: dict[str, str] = {}
    seen: dict[tuple[int, int, tuple], str] = {}
    for name, t in model.state_dict().items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key in seen:
            tied[name] = seen[key]
        else:
            seen[key] = name
            tensors[name] = t
    return tensors, tied


def save_model_dir(
    directory: Path,
    model: nn.Module,
    dtype: torch.dtype | None = None,
    metadata: dict | None = None,
) -> None:
    """Write ``model`` (and its config) to ``directory``; ``dtype`` e.g. fp16 to ship small.

    A quantized model (``aiayn.infer.quantize``) keeps its int8 weights and scales, and its
    config.json records the quantization, so that loading rebuilds the same layers.
    """
    directory = Path(directory)
    tensors, tied = untied_state_dict(model)
    tensors = {
        k: (v.to(dtype) if dtype is not None and v.is_floating_point() else v).contiguous().cpu()
        for k, v in tensors.items()
    }
    meta = {"tied": json.dumps(tied), "format": "aiayn", **(metadata or {})}
    atomic_write(directory / WEIGHTS_FILE, lambda p: save_file(tensors, str(p), metadata=meta))
    config = {"model": model.config.to_dict()}
    if getattr(model, "quantization", None):
        config["quantization"] = model.quantization
    write_json(directory / CONFIG_FILE, config)


def _read_config(directory: Path) -> dict:
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no model config here (is {directory} a model directory?)")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if "model" not in data:
        raise ValueError(f"{path}: missing the 'model' table")
    return data


def load_config(directory: Path) -> ModelConfig:
    path = Path(directory) / CONFIG_FILE
    data = _read_config(directory)
    try:
        return ModelConfig.from_dict(data["model"])
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from None


def _saved_quantization(directory: Path) -> dict | None:
    """The quantization a model directory was saved with (None: float weights)."""
    from aiayn.infer.quantize import check_method

    path = Path(directory) / CONFIG_FILE
    saved = _read_config(directory).get("quantization")
    if saved is None:
        return None
    if not isinstance(saved, dict) or not isinstance(saved.get("include_output", True), bool):
        raise ValueError(f"{path}: 'quantization' must be a table with method and include_output")
    try:
        check_method(saved.get("method"), flag="quantization.method")
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return saved


def load_model_dir(
    directory: Path, device: str | torch.device = "cpu", quantize: str | None = None
) -> nn.Module:
    """Rebuild the model saved in ``directory``, in eval mode, weights in float32.

    ``quantize`` ("int8") quantizes a float model's linear layers after loading
    (``aiayn.infer.quantize``); a directory saved quantized loads quantized whatever it says.
    """
    from aiayn.infer.quantize import check_method, quantize_int8

    directory = Path(directory)
    check_method(quantize)
    config = load_config(directory)
    saved_quantization = _saved_quantization(directory)
    if (quantize or saved_quantization) and torch.device(device).type != "cpu":
        raise ValueError(f"{directory}: int8 layers run on the CPU only, not on {device}")
    path = directory / WEIGHTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no weights file in the model directory")
    try:
        tensors = load_file(str(path))
        with open(path, "rb") as f:  # the header holds the tied-names map
            header_len = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(header_len))
    except (SafetensorError, OSError, ValueError) as e:
        raise ValueError(f"{path}: unreadable safetensors file ({e})") from None
    tied = json.loads(header.get("__metadata__", {}).get("tied", "{}"))
    model = build_model(config)
    if saved_quantization is not None:  # the same int8 layers, filled from the file below
        quantize_int8(model, include_output=saved_quantization.get("include_output", True))
    expected = model.state_dict()
    for alias, name in tied.items():
        if name in tensors:
            tensors[alias] = tensors[name]
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"{path}: weights do not fit {directory / CONFIG_FILE}: "
            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for name, want in expected.items():
        got = tensors[name]
        if got.shape != want.shape:
            raise ValueError(
                f"{path}: tensor {name} has shape {tuple(got.shape)}, but the config needs "
                f"{tuple(want.shape)}"
            )
        tensors[name] = got.to(want.dtype)
    model.load_state_dict(tensors, strict=True)
    if quantize is not None and saved_quantization is None:
        quantize_int8(model)
    return model.to(device).eval()
