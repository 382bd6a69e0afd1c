"""Scaled dot-product attention, multi-head attention and the key/value cache.

Vaswani et al. 2017 §3.2; Phuong & Hutter 2022, Algorithms 3-5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from aiayn.model.masks import CAUSAL, causal_mask


def attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout: float = 0.0
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, written out (Vaswani et al. 2017 §3.2.1, eq. 1).

    Phuong & Hutter 2022, Algorithm 3 for each query row, Algorithm 4 (Attention with a
    Mask from ``aiayn.model.masks``) for all of them at once, batched over heads.

    The slow, explicit path: used when attention weights are requested, and as the reference
    that the fused path is tested against. ``mask`` is bool, True = may attend.
    Returns the output (B, H, T, Dh) and the weights (B, H, T, S).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, H, T, S)
    if dropout > 0.0:
        weights = F.dropout(weights, p=dropout)
    return weights @ v, weights  # (B, H, T, Dh), (B, H, T, S)


# Under CPU autocast, attention runs in float32 on the bf16 projections: PyTorch's CPU flash
# kernel runs its bf16 backward far slower than its float32 one. On an AVX-512 bf16 CPU, bf16
# training ran 1.54x float32's tokens/s this way against 1.21x with attention in bf16
# (bench/experiments/bf16_attention.py). The softmax's sums are also float32's. On a GPU,
# autocast keeps attention in its own dtype.
CPU_AUTOCAST_FLOAT32 = True


# On a GPU, half-precision attention runs on the memory-efficient kernel (the math one where
# it refuses the inputs), neither cuDNN's, which PyTorch picks first on Hopper GPUs, nor flash.
# At the base model's training shapes (bench/gpu.py's ``attention`` section, bf16 forward and
# backward on an H200), it took 3.5 ms against cuDNN's 5.0 and math's 7.2 with a key-padding
# mask, and 3.2 ms against cuDNN's 3.6 and flash's 5.8 with the causal mask; decoding in bf16
# ran 6-7x faster without cuDNN's kernel (greedy 1,086 sentences/s against 183, beam 4 681
# against 96), which builds a plan for each new key length, that is each step.
CUDA_HALF_BACKENDS = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout: float, causal: bool = False
) -> Tensor:
    """``F.scaled_dot_product_attention`` (B, H, T, Dh), in float32 under CPU autocast, on
    ``CUDA_HALF_BACKENDS`` in half precision on a GPU; ``causal``: the unidirectional mask
    left to the kernel (``is_causal``, no ``mask``)."""
    kw = dict(attn_mask=mask, dropout_p=dropout, is_causal=causal)
    if q.is_cuda and q.dtype != torch.float32:
        with sdpa_kernel(CUDA_HALF_BACKENDS):
            return F.scaled_dot_product_attention(q, k, v, **kw)
    if CPU_AUTOCAST_FLOAT32 and q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        with torch.autocast("cpu", enabled=False):
            q, k, v = q.float(), k.float(), v.float()
            return F.scaled_dot_product_attention(q, k, v, **kw)
    return F.scaled_dot_product_attention(q, k, v, **kw)


# Decoding on a CPU reads a cache in first (``KVCache.stream_in``): one pass over its keys and
# values in memory order, before scaled_dot_product_attention walks them one sentence and head
# at a time, a few kilobytes each, reads that otherwise wait on memory (between two steps the
# weights and the other layers' caches push a cache out of the CPU's caches). On an AMD EPYC
# (Zen 4), greedy decoding in throughput mode ran 1.02x as fast in float32 and 1.05-1.09x in
# int8; in batches of 50, 0.97-1.01x in float32 and 1.08x in int8; one step 1.00-1.04x at 20
# and 64 sentences (bench/experiments/ab_decode.py). Caches smaller than STREAM_IN_FROM keys
# and values (512 KB of float32) are left as they are.
STREAM_IN = True
STREAM_IN_FROM = 1 << 17


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, D) to (B, H, T, D / H), a view: each head's features side by side."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def linear_rows(proj: nn.Module, x: Tensor, start: int, stop: int) -> Tensor:
    """Output features ``start:stop`` of the linear layer ``proj`` applied to ``x``, without
    computing the others (e.g. W_Q alone of the fused W_Q, W_K, W_V).

    ``proj`` is an ``nn.Linear`` or a layer with the same forward and a ``rows(start, stop)``
    method giving the layer of those output features (an int8 layer, ``aiayn.model.quantize``;
    a prepacked float32 layer, ``aiayn.model.layout``).
    """
    if hasattr(proj, "rows"):
        return proj.rows(start, stop)(x)
    bias = proj.bias[start:stop] if proj.bias is not None else None
    return F.linear(x, proj.weight[start:stop], bias)


@dataclass(frozen=True)
class Packing:
    """Where the real tokens of a padded batch (B, S) are, so that position-wise layers
    (projections, feed-forward, layer norms) can run on them alone, skipping the padding.

    ``index`` (n,) holds the flat positions b * S + s of the n real tokens, in order.
    """

    index: Tensor
    batch: int
    length: int

    @classmethod
    def of(cls, real: Tensor) -> Packing:
        """The packing of a token mask ``real`` (B, S), True = real token."""
        return cls(real.flatten().nonzero().squeeze(1), real.size(0), real.size(1))

    def pack(self, x: Tensor) -> Tensor:
        """(B, S, ...) to the real tokens' rows (n, ...)."""
        return x.flatten(0, 1).index_select(0, self.index)

    def unpack(self, rows: Tensor) -> Tensor:
        """(n, ...) back to (B, S, ...), zeros at the padding."""
        out = rows.new_zeros(self.batch * self.length, *rows.shape[1:])
        return out.index_copy_(0, self.index, rows).view(self.batch, self.length, *rows.shape[1:])


class KVCache:
    """Keys and values of one attention block kept across decoding steps.

    Self-attention appends the new step's keys and values (storage grows by doubling, so a
    step costs no reallocation in the common case). It keeps them together, one row of keys
    and values per token, (B, capacity, 2, H, Dh): the layout of the fused projection that
    makes them, so that a step appends each sentence's new keys and values with one
    contiguous copy; attention reads strided views (B, H, L, Dh) of it. Cross-attention stores
    the projections of the encoder memory once (``static``), keys and values together as the
    fused projection gives them (B, S, 2D) (``keep``). ``reorder`` follows beams as they are
    re-ranked.
    """

    def __init__(self, static: bool = False) -> None:
        self.static = static
        self.k: Tensor | None = None  # (B, H, L, Dh): views of memory_kv (static) or kv
        self.v: Tensor | None = None
        self.kv: Tensor | None = None  # (B, capacity, 2, H, Dh): self-attention's storage
        self.length = 0
        self._spare: Tensor | None = None  # reorder's target, reused
        self.memory_kv: Tensor | None = None  # static: (B, S, 2D), what k and v view

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``k``, ``v`` (B, H, t, Dh); return all keys and values so far (B, H, L, Dh)."""
        if self.static:  # kept as one (B, S, 2D) tensor, as ``keep`` keeps a projection
            b, h, length, _ = k.shape
            return self.keep(torch.cat((k, v), 1).transpose(1, 2).reshape(b, length, -1), h)
        return self.append(torch.stack((k, v), 2).transpose(1, 3))  # (B, t, 2, H, Dh)

    def keep(self, kv: Tensor, n_heads: int) -> tuple[Tensor, Tensor]:
        """A static cache's keys and values: the key and value columns of a fused projection
        of the memory ``kv`` (B, S, 2D), kept whole; returns them as (B, H, S, Dh) views."""
        self.memory_kv = kv
        k, v = (split_heads(x, n_heads) for x in kv.split(kv.size(-1) // 2, -1))
        self.k, self.v, self.length = k, v, kv.size(1)
        return k, v

    def stream_in(self) -> None:
        """Read the keys and values once, in memory order, before attention reads them one
        sentence and head at a time (CPU decoding; see ``STREAM_IN``)."""
        rows = self.memory_kv if self.static else self.kv
        if rows is not None and rows.numel() // rows.size(1) * self.length >= STREAM_IN_FROM:
            rows[:, : self.length].sum()

    def append(self, kv: Tensor) -> tuple[Tensor, Tensor]:
        """Append keys and values ``kv`` (B, t, 2, H, Dh) (the key and value columns of a fused
        projection (B, t, 2D), viewed so); return all keys and values so far (B, H, L, Dh)."""
        new = self.length + kv.size(1)
        if self.kv is None or new > self.kv.size(1):
            capacity = max(new, 2 * (self.kv.size(1) if self.kv is not None else 16))
            grown = kv.new_empty((kv.size(0), capacity, *kv.shape[2:]))
            if self.kv is not None:
                grown[:, : self.length] = self.kv[:, : self.length]
            self.kv = grown
        self.kv[:, self.length : new] = kv
        self.length = new
        return self._views()

    def _views(self) -> tuple[Tensor, Tensor]:
        filled = self.kv[:, : self.length]  # (B, L, 2, H, Dh)
        self.k, self.v = filled[:, :, 0].transpose(1, 2), filled[:, :, 1].transpose(1, 2)
        return self.k, self.v

    @property
    def filled(self) -> bool:
        return self.k is not None

    def reorder(self, index: Tensor) -> None:
        """Select batch rows ``index`` (B',) of the cache, e.g. the surviving beams.

        Only the filled part is copied, into a spare buffer that the next reorder reuses (its
        first rows, when rows have left): no allocation per step.
        """
        if self.static:
            if self.memory_kv is not None:
                self.keep(self.memory_kv.index_select(0, index), self.k.size(1))
            return
        if self.kv is None:
            return
        if torch.is_grad_enabled() and self.kv.requires_grad:
            self.kv, self._spare = self.kv.index_select(0, index), None
            self._views()
            return
        spare, rows = self._spare, len(index)
        if spare is None or spare.shape[1:] != self.kv.shape[1:] or spare.size(0) < rows:
            spare = self.kv.new_empty((rows, *self.kv.shape[1:]))
        n, target = self.length, spare[:rows]
        torch.index_select(self.kv[:, :n], 0, index, out=target[:, :n])
        self._spare, self.kv = self.kv, target
        self._views()


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017 §3.2.2; Phuong & Hutter 2022, Algorithm 5).

    One fused projection ``in_proj`` holds W_Q, W_K, W_V stacked (3D, D): self-attention
    projects with a single matmul; cross-attention uses its query rows on the decoder stream
    and its key/value rows on the encoder memory. The parameter layout is that of
    ``torch.nn.MultiheadAttention``.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _split_heads(self, x: Tensor) -> Tensor:
        return split_heads(x, self.n_heads)  # (B, H, T, Dh)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
        packing: Packing | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``x`` (B, T, D) to itself, or to ``memory`` (B, S, D) when given.

        ``mask`` is bool and broadcasts to (B, H, T, S), True = may attend, or
        ``aiayn.model.masks.CAUSAL`` (self-attention without a cache: the kernel's own causal
        mask). With a ``cache``,
        self-attention appends this call's keys/values to it, and cross-attention computes
        the memory's keys/values on the first call only. ``memory`` (and the cached keys and
        values) may hold one row per K rows of ``x`` (B = B' * K, consecutive rows sharing
        a source: the beams of one sentence): those queries then read one copy of the keys
        and values, and ``mask`` has B' rows. With ``packing`` (self-attention, no cache),
        ``x`` holds the real tokens alone (n, D), and so does the output: the projections
        skip the padding, which only the attention itself needs in place. Returns (B, T, D) and, if
        ``need_weights``, the attention weights (B, H, T, S).
        """
        d = self.d_model
        rows = None
        causal = mask is CAUSAL
        if causal:
            if cache is not None or memory is not None:
                raise ValueError("CAUSAL is a mask of self-attention over a whole sequence")
            mask = None
        if packing is not None:  # (n, D) real tokens: project them, then lay them out
            rows, x = x, packing.unpack(self.in_proj(x))  # (n, D), (B, T, 3D)
            q, k, v = x.split(d, dim=-1)  # 3 x (B, T, D)
            k, v = self._split_heads(k), self._split_heads(v)  # (B, H, T, Dh)
        elif memory is None:
            qkv = self.in_proj(x)  # (B, T, 3D)
            q, kv = qkv[..., :d], qkv[..., d:]  # (B, T, D), (B, T, 2D)
            if cache is not None:  # (B, T, 2, H, Dh) appended: (B, H, L, Dh) each
                k, v = cache.append(kv.unflatten(-1, (2, self.n_heads, self.d_head)))
            else:
                k, v = kv.split(d, dim=-1)  # 2 x (B, T, D)
                k, v = self._split_heads(k), self._split_heads(v)  # (B, H, T, Dh)
        else:
            q = linear_rows(self.in_proj, x, 0, d)  # (B, T, D)
            if cache is not None and cache.filled:
                k, v = cache.k, cache.v  # (B, H, S, Dh)
            else:
                kv = linear_rows(self.in_proj, memory, d, 3 * d)  # (B, S, 2D)
                if cache is not None:
                    k, v = cache.keep(kv, self.n_heads)  # (B, H, S, Dh)
                else:
                    k, v = (self._split_heads(x) for x in kv.split(d, dim=-1))  # (B, H, S, Dh)
        q = self._split_heads(q)  # (B, H, T, Dh)
        b, t = x.size(0), x.size(1)
        group = b // k.size(0)  # queries per key/value row: the K beams of one source
        if group > 1:  # (B'*K, H, T, Dh) -> (B', H, K*T, Dh): a source's beams share its keys
            q = q.view(k.size(0), group, self.n_heads, t, self.d_head).transpose(1, 2)
            q = q.reshape(k.size(0), self.n_heads, group * t, self.d_head)
        p = self.dropout if self.training else 0.0
        if STREAM_IN and cache is not None and t == 1 and x.is_cpu and not torch.is_grad_enabled():
            cache.stream_in()  # one query per row: a decoding step on a CPU
        weights = None
        if need_weights:
            if causal:
                mask = causal_mask(t, q.device)  # (1, 1, T, T)
            out, weights = attention(q, k, v, mask, p)  # (B, H, T, Dh)
        else:
            out = fused_attention(q, k, v, mask, p, causal)
        if group > 1:  # back to one row per beam: (B'*K, H, T, Dh)
            out = out.view(k.size(0), self.n_heads, group, t, self.d_head).transpose(1, 2)
            if weights is not None:
                weights = weights.view(k.size(0), self.n_heads, group, t, -1).transpose(1, 2)
                weights = weights.reshape(b, self.n_heads, t, -1)  # (B, H, T, S)
            out = out.reshape(b, self.n_heads, t, self.d_head)
        out = out.transpose(1, 2).reshape(b, t, d)  # (B, T, D)
        if rows is not None:
            out = packing.pack(out)  # (n, D)
        return self.out_proj(out), weights
