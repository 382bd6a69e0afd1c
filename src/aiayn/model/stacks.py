"""The pieces every Transformer family shares: the embedding, the layer stacks and the
decoding state (Vaswani et al. 2017 §3.1, §3.4-3.5; Phuong & Hutter 2022, Algorithms 1-4).

Attention weights for plots: pass a dict as ``attention=``; each stack appends its layers'
weights (B, H, T_q, T_k) under "encoder", "decoder_self" / "cross" or "decoder". The default
path (no dict) runs the fused kernel and computes no weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from aiayn.config import ModelConfig
from aiayn.model import masks
from aiayn.model.attention import KVCache, Packing
from aiayn.model.layers import (
    DecoderLayer,
    EncoderLayer,
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
)

AttentionRecord = dict[str, list[Tensor]]


def _positional(config: ModelConfig) -> nn.Module:
    if config.pos_encoding == "learned":
        return LearnedPositionalEncoding(config.d_model, config.max_len)
    return SinusoidalPositionalEncoding(config.d_model, config.max_len)


def _layer_kwargs(config: ModelConfig) -> dict:
    return dict(
        d_model=config.d_model,
        n_heads=config.n_heads,
        d_ff=config.d_ff,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation=config.activation,
        norm_first=config.norm_first,
        layer_norm_eps=config.layer_norm_eps,
    )


def init_linear_weights(module: nn.Module) -> None:
    """Xavier-uniform for every projection matrix, zero biases (as fairseq and T2T do)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def unembedding(config: ModelConfig, vocab_size: int) -> nn.Linear:
    """Pre-softmax projection (D -> V); with ``final_logits_bias``, a bias per output id."""
    return nn.Linear(config.d_model, vocab_size, bias=config.final_logits_bias)


def selected(x: Tensor, select: Tensor | None) -> Tensor:
    """The states (n, D) at the True positions of ``select`` (B, T); all of ``x`` if None.

    Training needs logits only where there is a target: skipping padding (or, for masked LM,
    the 85% unselected positions) before the unembedding saves its matmul and softmax there.
    """
    return x if select is None else x[select]


class Embedder(nn.Module):
    """Token embedding + positional encoding + dropout (Vaswani et al. 2017 §3.4-3.5, §5.4).

    The variants of pretrained encoders come from the config: a token-type embedding whose
    type 0 is added to every token (``n_token_types``) and a LayerNorm over the sum
    (``embedding_layer_norm``), both as in BERT (Devlin et al. 2019 §3, Figure 2).
    """

    def __init__(self, token: TokenEmbedding, config: ModelConfig) -> None:
        super().__init__()
        self.token = token
        self.position = _positional(config)
        self.token_type = None
        if config.n_token_types:
            self.token_type = nn.Embedding(config.n_token_types, config.d_model)
            nn.init.normal_(self.token_type.weight, mean=0.0, std=0.02)
        self.norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
            if config.embedding_layer_norm
            else None
        )
        self.dropout = nn.Dropout(config.embedding_dropout)

    def forward(self, tokens: Tensor, offset: int = 0) -> Tensor:
        x = self.position(self.token(tokens), offset)  # (B, T, D)
        if self.token_type is not None:
            x = x + self.token_type.weight[0]  # every token is of type 0
        x = self.norm(x) if self.norm is not None else x
        return self.dropout(x) if self.training else x  # (B, T, D)


def checkpointed(module: nn.Module, training_pass: bool) -> bool:
    """Whether ``module`` (a stack) recomputes its layers' activations in this pass: when
    ``set_activation_checkpointing`` turned it on and gradients are being recorded."""
    return module.activation_checkpointing and training_pass and torch.is_grad_enabled()


def set_activation_checkpointing(model: nn.Module, on: bool = True) -> None:
    """Every layer stack of ``model`` keeps only its layers' inputs for the backward pass and
    recomputes each layer's activations there (``torch.utils.checkpoint``; dropout draws the
    same masks again): activation memory of one layer instead of all, for one more forward
    pass of the stacks. Gradients are those of the plain pass."""
    for module in model.modules():
        if isinstance(module, (Encoder, Decoder)):
            module.activation_checkpointing = on


class Encoder(nn.Module):
    """A stack of ``EncoderLayer``; pre-LN stacks end with a final LayerNorm."""

    activation_checkpointing = False

    def __init__(self, config: ModelConfig, n_layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(**_layer_kwargs(config)) for _ in range(n_layers))
        self.norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None,
        caches: list[KVCache] | None = None,
        weights: list[Tensor] | None = None,
    ) -> Tensor:
        packing = self._packing(x, mask, caches, weights)
        if packing is not None:  # position-wise layers skip the padding
            x = packing.pack(x)  # (n, D)
        recompute = checkpointed(self, caches is None and weights is None and packing is None)
        for i, layer in enumerate(self.layers):
            if recompute:
                x = checkpoint(lambda x, layer=layer: layer(x, mask)[0], x, use_reentrant=False)
                continue
            cache = caches[i] if caches is not None else None
            x, w = layer(x, mask, cache=cache, need_weights=weights is not None, packing=packing)
            if weights is not None:
                weights.append(w)
        x = self.norm(x) if self.norm is not None else x
        return packing.unpack(x) if packing is not None else x  # (B, T, D)

    PACK_PADDING = 0.1  # pack when at least this share of the positions is padding

    def _packing(self, x, mask, caches, weights) -> Packing | None:
        """In inference, a packing of the real tokens when the batch holds enough padding.

        Then the outputs at padding positions are zeros rather than values nothing reads.
        """
        if torch.is_grad_enabled() or caches is not None or weights is not None:
            return None
        if not isinstance(mask, Tensor):  # no mask, or CAUSAL: no padding to skip
            return None
        if mask.size(-2) != 1:  # (B, 1, T, T) causal masks: every row is a real query
            return None
        real = mask[:, 0, 0, :]  # (B, T)
        if real.all() or real.float().mean() > 1 - self.PACK_PADDING:
            return None
        return Packing.of(real)


class Decoder(nn.Module):
    """A stack of ``DecoderLayer``; pre-LN stacks end with a final LayerNorm."""

    activation_checkpointing = False

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        n = config.n_decoder_layers
        self.layers = nn.ModuleList(DecoderLayer(**_layer_kwargs(config)) for _ in range(n))
        self.norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None,
        memory_mask: Tensor | None,
        state: DecoderState | None = None,
        attention: AttentionRecord | None = None,
    ) -> Tensor:
        if checkpointed(self, state is None and attention is None):
            for layer in self.layers:

                def run(x, memory, layer=layer):
                    return layer(x, memory, self_mask, memory_mask)[0]

                x = checkpoint(run, x, memory, use_reentrant=False)
            return self.norm(x) if self.norm is not None else x  # (B, T, D)
        for i, layer in enumerate(self.layers):
            x, w = layer(
                x,
                memory,
                self_mask,
                memory_mask,
                self_cache=state.self_caches[i] if state is not None else None,
                cross_cache=state.cross_caches[i] if state is not None else None,
                need_weights=attention is not None,
            )
            if attention is not None:
                attention.setdefault("decoder_self", []).append(w[0])
                attention.setdefault("cross", []).append(w[1])
        return self.norm(x) if self.norm is not None else x  # (B, T, D)


@dataclass
class DecoderState:
    """What incremental decoding carries from one step to the next.

    ``token_mask`` (B, L) marks the real tokens decoded so far (key padding for self-
    attention); it stays None while every token is real, the common case in generation,
    so that a step then needs no mask at all; a search that knows the tokens it feeds are
    real (``tokens_real``) spares ``advance`` looking (a host sync per step on a GPU).
    ``length`` counts the positions decoded;
    ``memory_mask`` is the encoder's key-padding mask (encoder-decoder only), one row per
    source, which ``beams`` consecutive target rows share (beam search).
    ``reorder`` selects batch rows, e.g. beams that survive a step of beam search.
    """

    self_caches: list[KVCache]
    cross_caches: list[KVCache] = field(default_factory=list)
    token_mask: Tensor | None = None
    memory_mask: Tensor | None = None
    length: int = 0
    beams: int = 1  # target rows per source row (memory_mask and cross caches)
    tokens_real: bool = False  # the caller vouches that the tokens it feeds hold no pad_id

    @property
    def offset(self) -> int:
        return self.length

    def advance(self, tokens: Tensor, pad_id: int) -> Tensor | None:
        """Record ``tokens`` (B, t) and return the self-attention mask (B, 1, t, L).

        None when every query may see every key: one new token per row and no padding so
        far (scaled_dot_product_attention then runs unmasked).
        """
        b, t = tokens.shape
        offset, self.length = self.length, self.length + t
        if self.token_mask is None and (
            self.tokens_real or bool(masks.token_mask(tokens, pad_id).all())
        ):
            return None if t == 1 else masks.causal_mask(t, tokens.device, offset)
        new = masks.token_mask(tokens, pad_id)  # (B, t)
        if self.token_mask is None:  # the first padding: every earlier token was real
            self.token_mask = torch.ones(b, offset, dtype=torch.bool, device=tokens.device)
        self.token_mask = torch.cat([self.token_mask, new], 1)  # (B, L)
        causal = masks.causal_mask(t, tokens.device, offset)  # (1, 1, t, L)
        return masks.guard_empty_rows(causal & self.token_mask[:, None, None, :])

    def reorder(self, index: Tensor, same_sources: bool = False) -> None:
        """Keep batch rows ``index`` (B',), in that order.

        ``same_sources``: every row moves only among rows that share its source (the beams
        of one sentence, ``beams`` consecutive rows per source), so the source side (cross-
        attention keys/values, memory mask) changes only when sentences leave the batch; a
        beam search then copies the target-side cache alone at most steps.
        """
        for cache in self.self_caches:
            cache.reorder(index)
        if self.token_mask is not None:
            self.token_mask = self.token_mask.index_select(0, index)
        if self.memory_mask is None:
            return
        if same_sources:  # the sources of the rows kept: one per group of beams
            if len(index) == len(self.memory_mask) * self.beams:
                return
            index = index.view(-1, self.beams)[:, 0] // self.beams  # (B' / K,)
        elif self.beams != 1:
            raise ValueError("rows that share a source can only move among their own beams")
        self.memory_mask = self.memory_mask.index_select(0, index)
        for cache in self.cross_caches:
            cache.reorder(index)
