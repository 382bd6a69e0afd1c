"""Sentence embeddings from an encoder: the mean of its final states over the real tokens.

Phuong & Hutter 2022, Algorithm 9 (ETransformer) up to its final layer; the vectors are what
the encoder's states hold, averaged over each text's tokens (padding never counts).
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.data.batching import pad
from aiayn.data.labelled import encode_texts
from aiayn.model import masks


@torch.no_grad()
def embed_texts(
    model, tokenizer, texts: list[str], normalize: bool = False, batch_size: int = 64
) -> Tensor:
    """Embeddings (N, D) of ``texts``: each text's encoder states averaged over its tokens.

    Texts are encoded as the classifier reads them (ending with eos; longer than the model's
    ``max_len`` truncated with a warning). ``normalize`` scales every vector to unit L2 norm.
    Padding is masked out of both attention and the mean, so a text's vector does not depend
    on the other texts of its batch.
    """
    if model.config.family != "encoder-only":
        raise ValueError(
            f"embeddings need an encoder-only model; this one is {model.config.family}"
        )
    model.eval()
    ids = encode_texts(tokenizer, texts, model.config.max_len, "embed")
    out = []
    for i in range(0, len(ids), batch_size):
        tokens = pad(ids[i : i + batch_size])  # (B, T)
        h = model.encode(tokens)  # (B, T, D)
        real = masks.token_mask(tokens, model.config.pad_id)[..., None]  # (B, T, 1)
        out.append((h * real).sum(1) / real.sum(1).clamp(min=1))  # (B, D)
    vectors = torch.cat(out) if out else torch.empty(0, model.config.d_model)  # (N, D)
    if normalize:
        vectors = torch.nn.functional.normalize(vectors, dim=-1)
    return vectors
