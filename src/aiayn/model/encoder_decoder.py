"""The encoder-decoder Transformer of Vaswani et al. 2017 (Phuong & Hutter 2022, Algorithm 8)."""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model import masks
from aiayn.model.attention import KVCache
from aiayn.model.layers import TokenEmbedding
from aiayn.model.stacks import (
    AttentionRecord,
    Decoder,
    DecoderState,
    Embedder,
    Encoder,
    init_linear_weights,
    selected,
    unembedding,
)


class EncoderDecoder(nn.Module):
    """The Transformer of Vaswani et al. 2017 (Fig. 1; Phuong & Hutter 2022, Algorithm 8).

    ``encode`` runs once per source; ``decode`` reuses its memory, with or without a
    ``DecoderState`` for step-by-step generation.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        src_token = TokenEmbedding(config.source_vocab, d, config.embed_scale)
        if config.tie_embeddings == "all":
            tgt_token = src_token
        else:
            tgt_token = TokenEmbedding(config.target_vocab, d, config.embed_scale)
        self.src_embed = Embedder(src_token, config)
        self.tgt_embed = Embedder(tgt_token, config)
        self.encoder = Encoder(config, config.n_encoder_layers)
        self.decoder = Decoder(config)
        self.unembed = unembedding(config, config.target_vocab)
        init_linear_weights(self)
        if config.tie_embeddings != "none":
            self.unembed.weight = tgt_token.weight  # §3.4: pre-softmax = embedding weights

    def encode(
        self, src: Tensor, attention: AttentionRecord | None = None
    ) -> tuple[Tensor, Tensor]:
        """Source tokens (B, S) to memory (B, S, D) and its key-padding mask (B, 1, 1, S)."""
        src_mask = masks.padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        weights = attention.setdefault("encoder", []) if attention is not None else None
        memory = self.encoder(self.src_embed(src), src_mask, weights=weights)  # (B, S, D)
        return memory, src_mask

    def new_state(self, src_mask: Tensor, beams: int = 1) -> DecoderState:
        """Decoding state for sources with key-padding mask ``src_mask`` (B, 1, 1, S).

        ``beams``: each source is decoded in that many consecutive target rows (B*K), which
        read one copy of its memory, its cross-attention keys and values, and its mask.
        """
        n = len(self.decoder.layers)
        return DecoderState(
            self_caches=[KVCache() for _ in range(n)],
            cross_caches=[KVCache(static=True) for _ in range(n)],
            memory_mask=src_mask,
            beams=beams,
        )

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        state: DecoderState | None = None,
        attention: AttentionRecord | None = None,
        select: Tensor | None = None,
        logits: bool = True,
        padded_right: bool = False,
    ) -> Tensor:
        """Target tokens (B, T) and memory (B, S, D) to next-token logits (B, T, V).

        With ``state``, ``tgt`` holds only the new tokens and the keys/values of earlier ones
        come from the cache; ``src_mask`` defaults to the state's. With ``select`` (bool, B, T)
        only the selected positions are unembedded: logits (n, V), in row-major order. The
        unembedding is Phuong & Hutter 2022, Algorithm 7 without its softmax (left to the
        loss or the decoder), its weights tied to the embedding by default (§3.4). With
        ``logits=False``, the decoder's states (B, T, D) or (n, D) before it: a loss that
        unembeds them a chunk at a time (``aiayn.train.objectives.unembedded_loss``).
        ``padded_right``: the caller vouches that ``tgt`` is padded at the end only, as
        training batches are; self-attention then leaves its causal mask to the attention
        kernel (``masks.CAUSAL``), the same mask at every real position.
        """
        pad = self.config.pad_id
        if state is None:
            offset, self_mask = 0, masks.self_attention_mask(tgt, pad, padded_right)
        else:
            offset, self_mask = state.offset, state.advance(tgt, pad)  # (B, 1, t, L)
            src_mask = state.memory_mask if src_mask is None else src_mask
        x = self.tgt_embed(tgt, offset)  # (B, T, D)
        x = self.decoder(x, memory, self_mask, src_mask, state, attention)  # (B, T, D)
        x = selected(x, select)  # (B, T, D) or (n, D)
        return self.unembed(x) if logits else x  # (B, T, V) or (n, V)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        attention: AttentionRecord | None = None,
        select: Tensor | None = None,
        logits: bool = True,
        padded_right: bool = False,
    ) -> Tensor:
        """Teacher-forced logits (B, T, V) for target inputs ``tgt`` (B, T) given ``src`` (B, S);
        (n, V) for the positions of ``select`` (B, T) only (training skips padding); the
        states before the unembedding with ``logits=False``; ``padded_right`` as ``decode``."""
        memory, src_mask = self.encode(src, attention)
        return self.decode(
            tgt, memory, src_mask, attention=attention, select=select, logits=logits,
            padded_right=padded_right,
        )  # fmt: skip
