"""The one place attention masks are built.

The Mask of Phuong & Hutter 2022, Algorithm 4: bidirectional (``padding_mask``: every
real token) or unidirectional (``causal_mask``: no token sees a later one).

Convention: boolean tensors, ``True`` = this query may attend to this key (and, for token
masks, ``True`` = real token). Masks broadcast to ``(B, H, T_q, T_k)`` and go straight into
``torch.nn.functional.scaled_dot_product_attention``; no additive -1e9 constants, which
overflow in fp16. Padding masks only keys, never whole query rows.
"""

from __future__ import annotations

import torch
from torch import Tensor


def token_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """``True`` where ``tokens`` (B, T) holds a real token rather than padding."""
    return tokens != pad_id  # (B, T)


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Key-padding mask (Vaswani et al. 2017 §3.2.3): every query may see every real key.

    The bidirectional Mask of Phuong & Hutter 2022, Algorithm 4, restricted to real tokens.

    Returns (B, 1, 1, S); rows whose keys are all padding attend to all keys instead, so that
    a fully padded sequence gives finite (and ignored) outputs rather than NaN.
    """
    keys = token_mask(tokens, pad_id)[:, None, None, :]  # (B, 1, 1, S)
    return guard_empty_rows(keys)


def causal_mask(length: int, device: torch.device | None = None, offset: int = 0) -> Tensor:
    """Lower-triangular mask (Vaswani et al. 2017 §3.2.3; Phuong & Hutter 2022, Algorithm 4,
    unidirectional).

    Query ``i`` sits at position ``offset + i`` and may attend to keys ``0 .. offset + i``.
    Returns (1, 1, T, offset + T).
    """
    q = torch.arange(length, device=device)[:, None] + offset  # (T, 1)
    k = torch.arange(length + offset, device=device)[None, :]  # (1, offset+T)
    return (k <= q)[None, None]  # (1, 1, T, offset+T)


class _Causal:
    """The type of ``CAUSAL``: no tensor, a request to the attention kernel."""

    def __repr__(self) -> str:
        return "CAUSAL"


CAUSAL = _Causal()
"""The unidirectional Mask of a batch padded at the end only (or not at all), passed as
``is_causal=True`` to ``scaled_dot_product_attention`` instead of a (B, 1, T, T) tensor: the
fused kernels (flash attention on a GPU) then skip the masked blocks instead of reading a mask.
At every real query it is the same mask as ``causal_padding_mask``: with padding only at the
end, the keys a real token may see (itself and earlier ones) are all real. Padding positions
attend to earlier padding too; their outputs are never read."""


def self_attention_mask(tokens: Tensor, pad_id: int, padded_right: bool) -> Tensor | _Causal:
    """The decoder's self-attention mask for a whole sequence (no cache): ``CAUSAL`` where the
    caller vouches that ``tokens`` (B, T) are padded at the end only (training batches), else
    ``causal_padding_mask`` (B, 1, T, T)."""
    return CAUSAL if padded_right else causal_padding_mask(tokens, pad_id)


def causal_padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Causal mask combined with key padding for decoder self-attention. (B, 1, T, T)."""
    length = tokens.size(1)
    keys = token_mask(tokens, pad_id)[:, None, None, :]  # (B, 1, 1, T)
    return guard_empty_rows(causal_mask(length, tokens.device) & keys)  # (B, 1, T, T)


def guard_empty_rows(mask: Tensor) -> Tensor:
    """Let a query row that may attend to nothing attend to everything.

    Such a row belongs to a padding position (its output is never used), but softmax over
    an all ``-inf`` row is NaN, and a NaN there would leak into gradients.
    """
    empty = ~mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
    return mask | empty
