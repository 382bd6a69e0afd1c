"""Weight layout for decoding on a CPU: linear weights stored transposed in memory.

``nn.Linear`` keeps W as (out, in), row-major, and computes x W^T: BLAS then multiplies by a
transposed operand. From few rows (a decoding step: one row per sentence still decoding) MKL
is markedly faster when W^T itself is the contiguous operand (on an AVX-512 Xeon 1.5-1.8x for
16 rows, 1.0x for 2400: ``python bench/experiments/linear_layout.py``; a decoding step 1.1-1.2x
at 4-64 sentences: ``bench/experiments/ab_decode.py --mode step``). ``column_major_weights``
re-lays each linear weight out so; its shape, values, ties and every result stay as they were
(up to the float rounding of a different summation order), only the strides change: F.linear
reads it untransposed.
"""

from __future__ import annotations

import functools
import os

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def column_major_weights(model: nn.Module) -> int:
    """Store every ``nn.Linear`` weight of ``model`` as the transpose of a contiguous (in, out)
    tensor, in place (a tied embedding shares it); returns how many distinct linear weights
    the model holds (all now so laid out).

    For inference: a weight so stored is not contiguous, which a caller that saves tensors
    must undo (``.contiguous()``); gradients and training work unchanged but gain nothing.
    """
    done: set[int] = set()
    for module in model.modules():
        if not isinstance(module, nn.Linear) or id(module.weight) in done:
            continue
        done.add(id(module.weight))
        w = module.weight.data
        if w.stride(0) != 1:  # not laid out yet
            module.weight.data = w.t().contiguous().t()
    return len(done)


# --- float32 products on oneDNN ---------------------------------------------------------
#
# PyTorch multiplies float32 with MKL, which on AMD CPUs takes its AVX2 kernels even where the
# CPU has AVX-512; oneDNN, also inside PyTorch, uses AVX-512 there. With the weight reordered
# once into oneDNN's blocked layout (what PyTorch's own CPU freezing does), its products ran
# 1.1-2.3x MKL's GFLOP/s on an AMD EPYC with AVX-512 from 4 rows and half a million
# multiply-adds up (the shipped model's shapes, one thread), while MKL stayed ahead below
# (0.4-0.97x at one row, or at 4 rows of a 256 x 256 product):
# ``python bench/experiments/fp32_kernels.py``. ``PackedLinear`` takes oneDNN from
# ``ONEDNN_ROWS`` rows and ``ONEDNN_MACS`` multiply-adds, MKL below; ``onednn_fp32`` says
# where that is the default.

ONEDNN_ROWS = 4
ONEDNN_MACS = 1 << 19
ENGINE_VARIABLE = "AIAYN_FP32_ENGINE"  # "mkl", "onednn" or "auto" (the default)


@functools.cache
def _cpu_vendor_flags() -> tuple[str, frozenset[str]]:
    """The CPU's vendor id and flags (Linux; empty elsewhere), read once."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "", frozenset()
    vendor, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "vendor_id" and not vendor:
            vendor = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
        if vendor and flags:
            break
    return vendor, frozenset(flags)


def onednn_fp32() -> bool:
    """Whether float32 inference products go to oneDNN: ``$AIAYN_FP32_ENGINE`` "onednn" or
    "mkl" decides; "auto" (or unset) picks oneDNN on AMD CPUs with AVX-512, where MKL lags
    (module doc), and MKL elsewhere."""
    choice = os.environ.get(ENGINE_VARIABLE, "auto").strip().lower() or "auto"
    if choice not in ("auto", "mkl", "onednn"):
        raise ValueError(f"${ENGINE_VARIABLE}={choice!r}: choose auto, mkl or onednn")
    if not torch.backends.mkldnn.is_available():
        return False
    if choice != "auto":
        return choice == "onednn"
    vendor, flags = _cpu_vendor_flags()
    return vendor == "AuthenticAMD" and "avx512f" in flags


class PackedLinear(nn.Linear):
    """An ``nn.Linear`` whose inference products from ``ONEDNN_ROWS`` rows and ``ONEDNN_MACS``
    multiply-adds run on oneDNN with the weight prepacked; smaller ones, gradients, other
    dtypes or devices take ``F.linear``.
    Its parameters, state dict and ties are the ``nn.Linear``'s; the packed copy (as much
    memory again as the weight) is rebuilt when the weight changes and never saved."""

    def _packed_weight(self, weight: Tensor) -> Tensor:
        key = (weight.data_ptr(), weight._version)
        cached = self.__dict__.get("_packed")
        if cached is None or cached[0] != key:
            packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous())
            self.__dict__["_packed"] = cached = (key, packed)
        return cached[1]

    def forward(self, x: Tensor) -> Tensor:
        # the parameters read from their dict: a module attribute costs some 0.6 us a name,
        # a few percent of a decoding step's small products
        weight, bias = self._parameters["weight"], self._parameters["bias"]
        n = x.numel()
        if (
            x.dtype is not torch.float32
            or not x.is_cpu
            or n < ONEDNN_ROWS * self.in_features
            or n * self.out_features < ONEDNN_MACS
            or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
        ):
            return F.linear(x, weight, bias)
        return torch.ops.mkldnn._linear_pointwise(
            x.contiguous(), self._packed_weight(weight), bias, "none", [], ""
        )

    def rows(self, start: int, stop: int) -> PackedLinear:
        """The layer of output features ``start:stop`` (its own packed copy, cached); with
        gradients, the product of the weight's rows, differentiable."""
        if torch.is_grad_enabled() and self.weight.requires_grad:
            bias = None if self.bias is None else self.bias[start:stop]
            return functools.partial(F.linear, weight=self.weight[start:stop], bias=bias)
        cache = self.__dict__.setdefault("_rows", {})
        key = (start, stop, self.weight.data_ptr(), self.weight._version)
        if key not in cache:
            if len(cache) > 8:  # of weights since replaced
                cache.clear()
            part = PackedLinear.__new__(PackedLinear)
            nn.Module.__init__(part)
            part.in_features, part.out_features = self.in_features, stop - start
            part.weight = nn.Parameter(self.weight.detach()[start:stop], requires_grad=False)
            bias = self.bias
            part.bias = None if bias is None else nn.Parameter(bias.detach()[start:stop], False)
            cache[key] = part
        return cache[key]

    def __getstate__(self):
        state = super().__getstate__()
        return {k: v for k, v in state.items() if k not in ("_packed", "_rows")}


def pack_linears(model: nn.Module) -> int:
    """Make every ``nn.Linear`` of ``model`` a ``PackedLinear`` (in place; parameters, ties
    and state dict unchanged); returns how many. For CPU inference."""
    n = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = PackedLinear
            n += 1
    return n
