"""The decoder-only (GPT-style) Transformer (Phuong & Hutter 2022, Algorithm 10)."""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model import masks
from aiayn.model.attention import KVCache
from aiayn.model.layers import TokenEmbedding
from aiayn.model.stacks import (
    AttentionRecord,
    DecoderState,
    Embedder,
    Encoder,
    init_linear_weights,
    selected,
    unembedding,
)


class DecoderOnly(nn.Module):
    """GPT-style causal language model (Phuong & Hutter 2022, Algorithm 10)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        token = TokenEmbedding(config.vocab_size, config.d_model, config.embed_scale)
        self.embed = Embedder(token, config)
        self.decoder = Encoder(config, config.n_decoder_layers)
        self.unembed = unembedding(config, config.vocab_size)
        init_linear_weights(self)
        if config.tie_embeddings != "none":
            self.unembed.weight = token.weight

    def new_state(self) -> DecoderState:
        return DecoderState(self_caches=[KVCache() for _ in self.decoder.layers])

    def forward(
        self,
        tokens: Tensor,
        state: DecoderState | None = None,
        attention: AttentionRecord | None = None,
        select: Tensor | None = None,
        logits: bool = True,
        padded_right: bool = False,
    ) -> Tensor:
        """Next-token logits (B, T, V) for ``tokens`` (B, T); with ``state``, new tokens only;
        (n, V) for the positions of ``select`` (B, T) only. The last step is the unembedding
        (Phuong & Hutter 2022, Algorithm 7, softmax left out); ``logits=False`` stops before
        it, returning the states; ``padded_right`` as ``EncoderDecoder.decode``."""
        pad = self.config.pad_id
        if state is None:
            offset, mask = 0, masks.self_attention_mask(tokens, pad, padded_right)
            caches = None
        else:
            offset, mask = state.offset, state.advance(tokens, pad)  # (B, 1, t, L)
            caches = state.self_caches
        weights = attention.setdefault("decoder", []) if attention is not None else None
        x = self.decoder(self.embed(tokens, offset), mask, caches, weights)  # (B, T, D)
        x = selected(x, select)  # (B, T, D) or (n, D)
        return self.unembed(x) if logits else x  # (B, T, V) or (n, V)
