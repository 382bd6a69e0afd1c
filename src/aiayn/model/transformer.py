"""The three Transformer families: encoder-decoder, encoder-only, decoder-only.

Vaswani et al. 2017 §3; Phuong & Hutter 2022, Algorithms 8 (EDTransformer), 9 (ETransformer)
and 10 (DTransformer). ``forward`` returns logits; losses live in ``aiayn.train.objectives``.

Attention weights for plots: pass a dict as ``attention=``; each stack appends its layers'
weights (B, H, T_q, T_k) under "encoder", "decoder_self" / "cross" or "decoder". The default
path (no dict) runs the fused kernel and computes no weights.

One module per family (``encoder_decoder``, ``encoder_only``, ``decoder_only``) over the
shared pieces in ``stacks``; their names are importable from here.
"""

from __future__ import annotations

from torch import nn

from aiayn.config import ModelConfig
from aiayn.model.decoder_only import DecoderOnly
from aiayn.model.encoder_decoder import EncoderDecoder
from aiayn.model.encoder_only import EncoderOnly
from aiayn.model.stacks import AttentionRecord, Decoder, DecoderState, Embedder, Encoder

__all__ = [
    "FAMILIES",
    "AttentionRecord",
    "Decoder",
    "DecoderOnly",
    "DecoderState",
    "EncoderDecoder",
    "EncoderOnly",
    "Embedder",
    "Encoder",
    "build_model",
]

FAMILIES = {
    "encoder-decoder": EncoderDecoder,
    "encoder-only": EncoderOnly,
    "decoder-only": DecoderOnly,
}


def build_model(config: ModelConfig) -> nn.Module:
    """The model of ``config.family`` with freshly initialised weights."""
    return FAMILIES[config.family](config)
