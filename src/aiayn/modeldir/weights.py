"""A model directory's weights: ``model.safetensors`` written and read.

Tied weights are stored once; the file is written atomically (temporary file, fsync, rename).
Equal weights give equal bytes: the safetensors header's metadata is written in sorted order.
The file carries the architecture it was saved with (``CONFIG_METADATA_KEY``), so a
``config.json`` edited or swapped for another model's is caught even when the shapes agree; an
int8 model's weights are loaded into the same int8 layers (``aiayn.model.quantize``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from safetensors.torch import save as save_bytes
from torch import nn

from aiayn.config import ARCHITECTURE_KEYS, ModelConfig
from aiayn.errors import UserError
from aiayn.fileio import (
    REPLACEABLE_MARKER,
    atomic_write,
    file_sha256,
    replace_directory,
    write_json,
)
from aiayn.model import build_model
from aiayn.model.layout import column_major_weights, onednn_fp32, pack_linears
from aiayn.model.quantize import quantize_int8

CONFIG_FILE = REPLACEABLE_MARKER  # "config.json": what --force may replace
WEIGHTS_FILE = "model.safetensors"
HASH_KEY = "sha256"  # config.json: {"model": {...}, "sha256": {"model.safetensors": HEX}}
CONFIG_METADATA_KEY = "aiayn_config"  # safetensors metadata: the architecture, as JSON


def safetensors_parts(
    tensors: dict[str, torch.Tensor], metadata: dict[str, str]
) -> list[bytes | memoryview]:
    """A safetensors file whose bytes depend only on the tensors and metadata, as its header
    followed by a view of each tensor's data (written one after the other; no copy).

    ``safetensors.torch.save`` builds the whole file in memory, twice over (a training
    process's peak memory would grow by two copies of the weights at every save). The library
    still lays the file out: it serializes one-element stand-ins of the tensors, whose header
    gives the tensors' order, dtype names and header keys; only the shapes and data offsets
    are filled in here. Its writer stores the metadata from a hash map, in an order that
    changes between processes, so the metadata keys are sorted.
    """
    probe = save_bytes(
        {k: torch.zeros(1, dtype=v.dtype) for k, v in tensors.items()}, metadata=metadata
    )
    n = int.from_bytes(probe[:8], "little")
    header = json.loads(probe[8 : 8 + n])
    header["__metadata__"] = dict(sorted(header.get("__metadata__", {}).items()))
    order = sorted(tensors, key=lambda k: header[k]["data_offsets"][0])
    offset = 0
    views = []
    for name in order:
        t = tensors[name]
        size = t.numel() * t.element_size()
        header[name]["shape"] = list(t.shape)
        header[name]["data_offsets"] = [offset, offset + size]
        offset += size
        views.append(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned, as the writer does
    return [len(text).to_bytes(8, "little") + text, *views]


def _write_parts(path: Path, parts) -> None:
    with open(path, "wb") as f:
        for part in parts:
            f.write(part)


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

    A quantized model (``aiayn.model.quantize``) keeps its int8 weights and scales, and its
    config.json records the quantization, so that loading rebuilds the same layers.
    """
    directory = Path(directory)
    tensors, tied = untied_state_dict(model)
    tensors = {
        k: (v.to(dtype) if dtype is not None and v.is_floating_point() else v).contiguous().cpu()
        for k, v in tensors.items()
    }
    architecture = {k: v for k, v in model.config.to_dict().items() if k in ARCHITECTURE_KEYS}
    meta = {
        "tied": json.dumps(tied, sort_keys=True),
        "format": "aiayn",
        CONFIG_METADATA_KEY: json.dumps(architecture, sort_keys=True),
        **(metadata or {}),
    }
    parts = safetensors_parts(tensors, meta)
    atomic_write(directory / WEIGHTS_FILE, lambda p: _write_parts(p, parts))
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part)
    digest = sha.hexdigest()
    config = {"model": model.config.to_dict(), HASH_KEY: {WEIGHTS_FILE: digest}}
    if getattr(model, "quantization", None):
        config["quantization"] = model.quantization
    write_json(directory / CONFIG_FILE, config)


def save_quantized(
    src: Path, out: Path, model: nn.Module, force: bool = False, run: dict | None = None
) -> None:
    """Write the quantized ``model`` of the model directory ``src`` to ``out`` (replaced whole,
    ``replace_directory``), with every other file of ``src`` (tokenizer, run.json, ...);
    ``run``, when given, is written as run.json instead of ``src``'s (its record of the
    weights says int8: ``aiayn.modeldir.provenance``)."""
    src = Path(src)
    written = (CONFIG_FILE, WEIGHTS_FILE, *(("run.json",) if run is not None else ()))
    with replace_directory(out, force, keep=[src]) as new:
        for item in sorted(src.iterdir()):  # everything but the weights and their config
            if item.is_file() and item.name not in written:
                shutil.copy2(item, new / item.name)
        if run is not None:
            write_json(new / "run.json", run)
        save_model_dir(new, model)


def recorded_sha256(data: dict) -> str | None:
    """The weights' SHA-256 that a parsed config.json ``data`` records; None: written before
    the hash was recorded."""
    recorded = data.get(HASH_KEY, {})
    return recorded.get(WEIGHTS_FILE) if isinstance(recorded, dict) else None


def weights_sha256(data: dict, directory: Path) -> str:
    """The SHA-256 of ``directory``'s weights file, which must be the one its config.json
    (parsed: ``data``) records, when it records one."""
    path = directory / WEIGHTS_FILE
    if not path.is_file():
        raise UserError(f"{path}: no weights file in the model directory")
    try:
        got = file_sha256(path)
    except OSError as e:
        raise UserError(f"{path}: cannot read the weights ({e.strerror or e})") from None
    want = recorded_sha256(data)
    if want is not None and got != want:
        raise UserError(
            f"{path}: the weights are damaged or were replaced (SHA-256 {got[:12]}..., but "
            f"{directory / CONFIG_FILE} records {str(want)[:12]}...); restore the directory "
            "from a copy, or save the model again"
        )
    return got


def check_saved_architecture(config: ModelConfig, metadata: dict, path: Path) -> None:
    """The weights' own record of their architecture must agree with ``config.json``."""
    try:
        saved = json.loads(metadata.get(CONFIG_METADATA_KEY, "{}"))
    except json.JSONDecodeError:
        raise UserError(f"{path}: damaged metadata ({CONFIG_METADATA_KEY})") from None
    mine = config.to_dict()
    diff = sorted(k for k, v in saved.items() if k in mine and mine[k] != v)
    if diff:
        shown = ", ".join(f"{k} = {mine[k]!r} (the weights: {saved[k]!r})" for k in diff)
        raise UserError(
            f"{path.parent / CONFIG_FILE} does not describe these weights: {shown}; "
            "restore the config.json saved with them"
        )


def load_weights(
    directory: Path,
    config: ModelConfig,
    saved_quantization: dict | None,
    device: str | torch.device = "cpu",
    quantize: str | None = None,
    dtype: torch.dtype = torch.float32,
) -> nn.Module:
    """Rebuild the model whose weights ``directory`` holds, described by ``config`` (and
    ``saved_quantization``, from its config.json), in eval mode, floating weights in ``dtype``
    (float32 by default; on a CPU, linear weights laid out column-major for decoding:
    ``aiayn.model.layout``). The weights file must already be checked against the SHA-256
    config.json records (``aiayn.modeldir.ModelDir.weights_sha256``).

    ``quantize`` ("int8") quantizes a float model's linear layers after loading
    (``aiayn.model.quantize``); a directory saved quantized loads quantized whatever it says.
    """
    path = directory / WEIGHTS_FILE
    try:
        tensors = load_file(str(path))
        with open(path, "rb") as f:  # the header holds the tied-names map
            header_len = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(header_len))
        metadata = header.get("__metadata__") or {}
        tied = json.loads(metadata.get("tied", "{}"))
    except (SafetensorError, OSError, ValueError, AttributeError) as e:
        raise UserError(f"{path}: unreadable safetensors file ({e})") from None
    check_saved_architecture(config, metadata, path)
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
        raise UserError(
            f"{path}: weights do not fit {directory / CONFIG_FILE}: "
            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for name, want in expected.items():
        got = tensors[name]
        if got.shape != want.shape:
            raise UserError(
                f"{path}: tensor {name} has shape {tuple(got.shape)}, but the config needs "
                f"{tuple(want.shape)}"
            )
        tensors[name] = got.to(want.dtype)
    model.load_state_dict(tensors, strict=True)
    if quantize is not None and saved_quantization is None:
        quantize_int8(model)
    if dtype != torch.float32:  # cast where the weights are (the CPU), then moved: half the bytes
        model = model.to(dtype=dtype)
    model = model.to(device).eval()
    if torch.device(device).type == "cpu":
        column_major_weights(model)  # faster products from few rows (aiayn.model.layout)
        if onednn_fp32():
            pack_linears(model)  # oneDNN's products where MKL lags (aiayn.model.layout)
    return model
