"""The autograd mode decoding runs in."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import torch

F = TypeVar("F", bound=Callable)


def _ordinary(value):
    """``value`` with each tensor in it (or in a tuple of results) copied out of inference
    mode: callers may then modify it in place or use it where autograd records."""
    if isinstance(value, torch.Tensor):
        return value.clone() if value.is_inference() else value
    if isinstance(value, tuple):
        return tuple(_ordinary(v) for v in value)
    return value


def decoding(fn: F) -> F:
    """Run ``fn`` under ``torch.inference_mode``: no gradients and, unlike ``torch.no_grad``,
    no version counters or view records kept for any tensor it creates, a cost every operator
    of a decoding step pays (1.02-1.08x on int8 throughput-mode decoding, 1.01x on float32:
    ``bench/experiments/ab_decode.py``). The tensors it returns come back as ordinary
    tensors (a copy of the token ids; the decoding state stays inside); called in inference
    mode already (one decoder calling another, or a caller's own block), it runs as it is."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if torch.is_inference_mode_enabled():  # the outer call copies out, if it must
            return fn(*args, **kwargs)
        with torch.inference_mode():
            result = fn(*args, **kwargs)
        return _ordinary(result)

    return wrapper  # type: ignore[return-value]
