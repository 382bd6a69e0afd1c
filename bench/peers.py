"""The peers the benchmarks run beside aiayn, built with the same sizes as a ModelConfig.

- ``TorchTransformer``: torch.nn.Transformer with the paper's embeddings (tied, scaled by
  sqrt(d_model)), sinusoidal positional encoding and tied output projection;
- ``Marian``: Hugging Face MarianMTModel (post-LN, ReLU, sinusoidal positions, scaled and
  shared embeddings) with random weights, or with the weights of an aiayn model
  (``marian_from``), so that decoding compares the same translation model.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from aiayn.config import ModelConfig
from aiayn.data.tokenizer import BOS, EOS, PAD
from aiayn.model.layers import sinusoidal_table


class TorchTransformer(nn.Module):
    """torch.nn.Transformer dressed as the paper's model: tied embeddings, sinusoidal PE."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.d_model = c.d_model
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=c.d_model**-0.5)
        self.register_buffer("pe", sinusoidal_table(c.max_len, c.d_model), persistent=False)
        self.drop = nn.Dropout(c.embedding_dropout)
        self.core = nn.Transformer(
            c.d_model,
            c.n_heads,
            c.n_encoder_layers,
            c.n_decoder_layers,
            c.d_ff,
            c.dropout,
            batch_first=True,
        )

    def _embed(self, x):
        return self.drop(self.embed(x) * math.sqrt(self.d_model) + self.pe[: x.size(1)])

    def forward(self, src, tgt):
        causal = nn.Transformer.generate_square_subsequent_mask(
            tgt.size(1), device=tgt.device, dtype=torch.bool
        )
        h = self.core(
            self._embed(src),
            self._embed(tgt),
            tgt_mask=causal,
            src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt == PAD,
            memory_key_padding_mask=src == PAD,
            tgt_is_causal=True,
        )
        return h @ self.embed.weight.T  # (B, T, V)


class Marian(nn.Module):
    """Hugging Face MarianMTModel with the preset's sizes, called like our model."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        from transformers import MarianConfig, MarianMTModel

        config = MarianConfig(
            vocab_size=c.vocab_size,
            d_model=c.d_model,
            encoder_layers=c.n_encoder_layers,
            decoder_layers=c.n_decoder_layers,
            encoder_attention_heads=c.n_heads,
            decoder_attention_heads=c.n_heads,
            encoder_ffn_dim=c.d_ff,
            decoder_ffn_dim=c.d_ff,
            activation_function="relu",
            dropout=c.dropout,
            attention_dropout=c.attention_dropout,
            activation_dropout=0.0,
            max_position_embeddings=c.max_len,
            scale_embedding=True,
            share_encoder_decoder_embeddings=True,
            tie_word_embeddings=True,
            pad_token_id=PAD,
            bos_token_id=BOS,
            eos_token_id=EOS,
            decoder_start_token_id=BOS,
            forced_eos_token_id=None,  # aiayn forces nothing at the length limit
        )
        self.model = MarianMTModel(config)

    def forward(self, src, tgt):
        out = self.model(
            input_ids=src,
            attention_mask=src != PAD,
            decoder_input_ids=tgt,
            decoder_attention_mask=tgt != PAD,
            use_cache=False,
        )
        return out.logits


def marian_from(model) -> Marian:
    """A MarianMTModel holding the weights of an aiayn EncoderDecoder (three-way tied)."""
    c = model.config
    if c.tie_embeddings != "all" or c.norm_first or c.activation != "relu":
        raise ValueError("marian_from needs a post-LN ReLU model with all embeddings tied")
    peer = Marian(c).eval()
    hf, ours = peer.model.model, model.state_dict()
    table = sinusoidal_table(c.max_len, c.d_model)  # Marian's own layout is [sin | cos]

    def attn(dst, prefix):
        q, k, v = ours[f"{prefix}.in_proj.weight"].chunk(3)
        qb, kb, vb = ours[f"{prefix}.in_proj.bias"].chunk(3)
        for proj, w, b in ((dst.q_proj, q, qb), (dst.k_proj, k, kb), (dst.v_proj, v, vb)):
            proj.weight.copy_(w)
            proj.bias.copy_(b)
        dst.out_proj.weight.copy_(ours[f"{prefix}.out_proj.weight"])
        dst.out_proj.bias.copy_(ours[f"{prefix}.out_proj.bias"])

    def copy(dst, name):
        dst.weight.copy_(ours[f"{name}.weight"])
        dst.bias.copy_(ours[f"{name}.bias"])

    with torch.no_grad():
        for emb in (hf.shared, hf.encoder.embed_tokens, hf.decoder.embed_tokens):
            emb.weight.copy_(ours["src_embed.token.weight"])
        peer.model.lm_head.weight.copy_(ours["src_embed.token.weight"])
        peer.model.final_logits_bias.zero_()
        hf.encoder.embed_positions.weight.copy_(table)
        hf.decoder.embed_positions.weight.copy_(table)
        for i, layer in enumerate(hf.encoder.layers):
            p = f"encoder.layers.{i}"
            attn(layer.self_attn, f"{p}.self_attn")
            copy(layer.fc1, f"{p}.ffn.linear1")
            copy(layer.fc2, f"{p}.ffn.linear2")
            copy(layer.self_attn_layer_norm, f"{p}.norm1")
            copy(layer.final_layer_norm, f"{p}.norm2")
        for i, layer in enumerate(hf.decoder.layers):
            p = f"decoder.layers.{i}"
            attn(layer.self_attn, f"{p}.self_attn")
            attn(layer.encoder_attn, f"{p}.cross_attn")
            copy(layer.fc1, f"{p}.ffn.linear1")
            copy(layer.fc2, f"{p}.ffn.linear2")
            copy(layer.self_attn_layer_norm, f"{p}.norm1")
            copy(layer.encoder_attn_layer_norm, f"{p}.norm2")
            copy(layer.final_layer_norm, f"{p}.norm3")
    return peer
