"""Embeddings, positional encodings, the feed-forward block and the encoder/decoder layers."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model.attention import KVCache, MultiHeadAttention, Packing


class TokenEmbedding(nn.Module):
    """Token embedding scaled by sqrt(d_model) (Vaswani et al. 2017 §3.4; P&H 2022 Algorithm 1).

    The scale applies whatever the positional encoding, learned or sinusoidal; ``scale=False``
    leaves the embedding unscaled (BERT, GPT-2).
    """

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.scale = math.sqrt(d_model) if scale else 1.0
        nn.init.normal_(self.weight, mean=0.0, std=d_model**-0.5)

    def forward(self, tokens: Tensor) -> Tensor:
        return F.embedding(tokens, self.weight) * self.scale  # (B, T, D)


def sinusoidal_table(length: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (§3.5). (L, D).

    Phuong & Hutter 2022 name this table as the alternative to Algorithm 2's learned one.
    """
    pos = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),)
    angle = pos / torch.pow(10000.0, i / d_model)  # (L, ceil(D/2))
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal positions added to the embeddings (Vaswani §3.5; P&H Algorithm 2).

    Not a parameter and not saved; the table grows on demand past ``max_len``.
    """

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.table.size(0):
            self.table = sinusoidal_table(2 * end, self.d_model).to(self.table.device)
        return x + self.table[offset:end].to(x.dtype)  # (B, T, D)


class LearnedPositionalEncoding(nn.Module):
    """Learned position embeddings (Vaswani et al. 2017 Table 3 row E; P&H 2022 Algorithm 2)."""

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.weight.size(0):
            raise ValueError(
                f"sequence reaches position {end}, past max_len={self.weight.size(0)} of the "
                "learned positional encoding; truncate the input or raise model.max_len"
            )
        return x + self.weight[offset:end]  # (B, T, D)


def _same(x: Tensor) -> Tensor:
    return x


def _gelu_tanh(x: Tensor) -> Tensor:
    return F.gelu(x, approximate="tanh")


ACTIVATIONS = {
    "relu": F.relu,  # max(0, x), the paper's (§3.3)
    "gelu": F.gelu,  # x * Phi(x), exact (Hendrycks & Gimpel 2016; BERT)
    "gelu_tanh": _gelu_tanh,  # GELU's tanh approximation (GPT-2)
    "swish": F.silu,  # x * sigmoid(x) (Ramachandran et al. 2017; Marian)
}


class FeedForward(nn.Module):
    """Position-wise feed-forward network max(0, x W1 + b1) W2 + b2 (§3.3).

    ReLU as in Vaswani et al.; ``activation`` picks another of ``ACTIVATIONS`` (the GELU of
    Phuong & Hutter 2022, Algorithms 9 and 10; the variants pretrained checkpoints use).
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu") -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]
        self._relu = activation == "relu"  # applied in place: the product is a fresh tensor

    def forward(self, x: Tensor) -> Tensor:
        h = self.linear1(x)  # (B, T, d_ff)
        return self.linear2(h.relu_() if self._relu else self.activation(h))  # (B, T, D)


class EncoderLayer(nn.Module):
    """Self-attention and feed-forward sub-layers, each with residual dropout (§3.1, §5.4).

    Post-LN (the paper): x = LayerNorm(x + Dropout(Sublayer(x))). Pre-LN (``norm_first``):
    x = x + Dropout(Sublayer(LayerNorm(x))): the norm sees the sub-layer input only; the raw
    residual stream is added back. With a causal mask this is also the decoder-only block
    (Phuong & Hutter 2022, Algorithm 10). The layer normalisation is ``torch.nn.LayerNorm``
    (Phuong & Hutter 2022, Algorithm 6; Ba et al. 2016), over each position's D features.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.ffn = FeedForward(d_model, d_ff, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
        packing: Packing | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """``x`` (B, T, D); with ``packing``, the real tokens alone (n, D)."""
        kw = dict(mask=mask, cache=cache, need_weights=need_weights, packing=packing)
        drop = self.dropout if self.training else _same  # no module call per sub-layer in eval
        if self.norm_first:
            h, weights = self.self_attn(self.norm1(x), **kw)
            x = x + drop(h)
            x = x + drop(self.ffn(self.norm2(x)))
        else:
            h, weights = self.self_attn(x, **kw)
            x = self.norm1(x + drop(h))
            x = self.norm2(x + drop(self.ffn(x)))
        return x, weights  # (B, T, D), (B, H, T, T) or None


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, feed-forward (§3.1).

    Same residual/normalisation scheme as ``EncoderLayer``, with a third sub-layer; its
    layer normalisation is ``torch.nn.LayerNorm`` (Phuong & Hutter 2022, Algorithm 6).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.ffn = FeedForward(d_model, d_ff, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        nw = need_weights
        drop = self.dropout if self.training else _same  # no module call per sub-layer in eval
        if self.norm_first:
            h, w_self = self.self_attn(
                self.norm1(x), mask=self_mask, cache=self_cache, need_weights=nw
            )
            x = x + drop(h)
            h, w_cross = self.cross_attn(
                self.norm2(x), memory, mask=memory_mask, cache=cross_cache, need_weights=nw
            )
            x = x + drop(h)
            x = x + drop(self.ffn(self.norm3(x)))
        else:
            h, w_self = self.self_attn(x, mask=self_mask, cache=self_cache, need_weights=nw)
            x = self.norm1(x + drop(h))
            h, w_cross = self.cross_attn(
                x, memory, mask=memory_mask, cache=cross_cache, need_weights=nw
            )
            x = self.norm2(x + drop(h))
            x = self.norm3(x + drop(self.ffn(x)))
        return x, ((w_self, w_cross) if need_weights else None)
