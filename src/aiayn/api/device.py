"""Where a model runs and in what precision: the ``device`` and ``dtype`` of ``aiayn.load``,
read here once for the API, the command line (``--device``, ``--dtype``) and the server.

``device`` is "auto", "cpu", "cuda" or "cuda:N": "auto" is CUDA when
``torch.cuda.is_available()``, else the CPU (and the CPU for int8 layers, which run there
only). ``dtype`` is "float32" (the weights as saved), "bfloat16" or "float16" (CUDA only):
the model's floating weights are cast to it after loading. Every refusal is an
``OptionError`` naming the option and the values allowed, raised before anything loads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from aiayn.errors import OptionError

DEVICES = ("auto", "cpu", "cuda", "cuda:N")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


@dataclass(frozen=True)
class Placement:
    """A resolved ``device`` and ``dtype``."""

    device: torch.device
    dtype: torch.dtype


def check_device(device: str | torch.device) -> str:
    """``device`` as text if it is one of ``DEVICES`` (a ``torch.device`` of the CPU or CUDA
    too); an ``OptionError`` naming the allowed values otherwise. Nothing is looked up."""
    text = str(device).strip().lower() if isinstance(device, str | torch.device) else None
    if text is None or not _DEVICE.fullmatch(text):
        raise OptionError(
            f"device {device!r}: choose auto, cpu, cuda or cuda:N (N: a GPU's index, e.g. cuda:0)",
            "device",
        )
    return text


def resolve_device(device: str | torch.device = "auto", *, quantized: bool = False) -> torch.device:
    """The ``torch.device`` that ``device`` names on this machine: "auto" is CUDA when
    ``torch.cuda.is_available()``, else the CPU (the CPU too when ``quantized``: int8 layers
    run there only); "cuda" or "cuda:N" without that GPU is an ``OptionError``."""
    text = check_device(device)
    if text == "auto":
        text = "cuda" if torch.cuda.is_available() and not quantized else "cpu"
    resolved = torch.device(text)
    if resolved.type == "cuda":
        _check_cuda(text, resolved.index or 0)
    if quantized and resolved.type != "cpu":
        raise OptionError(
            f"int8 layers (quantize int8, or a model saved quantized) run on the CPU only, "
            f"not on device {text}: use device cpu (or auto)",
            "quantize",
            "device",
        )
    return resolved


def _check_cuda(text: str, index: int) -> None:
    if not torch.cuda.is_available():
        why = (
            "this torch is built without CUDA"
            if torch.version.cuda is None
            else "torch finds no CUDA GPU (driver or CUDA_VISIBLE_DEVICES)"
        )
        raise OptionError(
            f"device {text}: CUDA is not available ({why}); use device cpu or auto", "device"
        )
    count = torch.cuda.device_count()
    if index >= count:
        names = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
        raise OptionError(
            f"device {text}: this machine has {count} CUDA GPU{'s' if count > 1 else ''} ({names})",
            "device",
        )


def resolve_dtype(dtype: str | torch.dtype = "float32") -> torch.dtype:
    """The ``torch.dtype`` of one of ``DTYPES`` (by name or as the dtype itself)."""
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype.strip().lower() in DTYPES:
        return DTYPES[dtype.strip().lower()]
    raise OptionError(f"dtype {dtype!r}: choose {', '.join(DTYPES)}", "dtype")


def dtype_name(dtype: torch.dtype) -> str:
    """ "bfloat16" for ``torch.bfloat16``: the name ``DTYPES`` gives it."""
    return str(dtype).removeprefix("torch.")


def placement(
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    *,
    quantize: str | None = None,
    engine: str = "torch",
) -> Placement:
    """``device`` and ``dtype`` resolved and checked against each other and against
    ``quantize`` and ``engine``: float16 needs CUDA; int8 layers (``quantize`` "int8", or
    a directory saved quantized) compute in float32 on the CPU; the ctranslate2 engine
    decodes in float32 (int8 with ``quantize``)."""
    resolved_dtype = resolve_dtype(dtype)
    resolved = resolve_device(device, quantized=quantize is not None)
    name = dtype_name(resolved_dtype)
    if resolved_dtype is torch.float16 and resolved.type != "cuda":
        raise OptionError(
            f"dtype float16 runs on CUDA only, and device {check_device(device)} is the CPU "
            "here: on the CPU use dtype bfloat16 or float32",
            "dtype",
            "device",
        )
    if resolved_dtype is not torch.float32 and quantize is not None:
        raise OptionError(
            f"int8 layers (quantize int8, or a model saved quantized) compute in float32, "
            f"not in dtype {name}: use dtype float32",
            "quantize",
            "dtype",
        )
    if resolved_dtype is not torch.float32 and engine == "ctranslate2":
        raise OptionError(
            f"dtype {name} needs engine torch; engine {engine} decodes in float32 (int8 with "
            "quantize int8)",
            "dtype",
            "engine",
            "quantize",
        )
    return Placement(resolved, resolved_dtype)
