"""The encoder-only (BERT-style) Transformer (Phuong & Hutter 2022, Algorithm 9)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model import masks
from aiayn.model.layers import ACTIVATIONS, TokenEmbedding
from aiayn.model.stacks import (
    AttentionRecord,
    Embedder,
    Encoder,
    init_linear_weights,
    selected,
    unembedding,
)


class EncoderOnly(nn.Module):
    """BERT-style bidirectional encoder (Phuong & Hutter 2022, Algorithm 9).

    ``forward`` gives masked-LM logits (B, T, V) through the head of Algorithm 9 (dense,
    ``config.mlm_activation`` (GELU there), LayerNorm, unembedding); ``classify`` pools the final states into class logits (B, C),
    through BERT's pooler (dense + tanh) first when ``config.pooler`` is "tanh".
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        token = TokenEmbedding(config.vocab_size, d, config.embed_scale)
        self.embed = Embedder(token, config)
        self.encoder = Encoder(config, config.n_encoder_layers)
        self.mlm_dense = nn.Linear(d, d)
        self.mlm_activation = ACTIVATIONS[config.mlm_activation]
        self.mlm_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.unembed = unembedding(config, config.vocab_size)
        self.pooler = nn.Sequential(nn.Linear(d, d), nn.Tanh()) if config.pooler == "tanh" else None
        self.classifier = None
        if config.n_classes:
            self.classifier = nn.Sequential(
                nn.Dropout(config.dropout), nn.Linear(d, config.n_classes)
            )
        init_linear_weights(self)
        if config.tie_embeddings != "none":
            self.unembed.weight = token.weight

    def encode(self, tokens: Tensor, attention: AttentionRecord | None = None) -> Tensor:
        """Tokens (B, T) to contextual states (B, T, D)."""
        mask = masks.padding_mask(tokens, self.config.pad_id)  # (B, 1, 1, T)
        weights = attention.setdefault("encoder", []) if attention is not None else None
        return self.encoder(self.embed(tokens), mask, weights=weights)  # (B, T, D)

    def forward(
        self,
        tokens: Tensor,
        attention: AttentionRecord | None = None,
        select: Tensor | None = None,
    ) -> Tensor:
        """Masked-LM logits (B, T, V); (n, V) for the positions of ``select`` (B, T) only.

        The last step is the unembedding (Phuong & Hutter 2022, Algorithm 7, softmax left out).
        """
        h = selected(self.encode(tokens, attention), select)  # (B, T, D) or (n, D)
        h = self.mlm_norm(self.mlm_activation(self.mlm_dense(h)))
        return self.unembed(h)  # (B, T, V) or (n, V)

    def pool(self, h: Tensor, tokens: Tensor) -> Tensor:
        """Pool states (B, T, D) over real tokens: max (padding never wins), mean, or first.

        A row with no real token (all padding) pools to zeros whatever the pooling, so
        that it stays finite in training and evaluation.
        """
        real = masks.token_mask(tokens, self.config.pad_id)[..., None]  # (B, T, 1)
        if self.config.pooling == "first":
            pooled = h[:, 0]  # (B, D)
        elif self.config.pooling == "mean":
            pooled = (h * real).sum(1) / real.sum(1).clamp(min=1)  # (B, D)
        else:
            pooled = h.masked_fill(~real, torch.finfo(h.dtype).min).amax(dim=1)  # (B, D)
        return pooled.masked_fill(~real.any(dim=1), 0.0)  # (B, D)

    def classify(self, tokens: Tensor, attention: AttentionRecord | None = None) -> Tensor:
        """Class logits (B, C) for token sequences (B, T)."""
        if self.classifier is None:
            raise ValueError("this model has no classifier: set model.n_classes >= 2")
        pooled = self.pool(self.encode(tokens, attention), tokens)  # (B, D)
        if self.pooler is not None:
            pooled = self.pooler(pooled)  # (B, D)
        return self.classifier(pooled)  # (B, C)
