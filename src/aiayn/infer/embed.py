"""Sentence embeddings from an encoder-only model: its final states pooled over real tokens.

The pooling is the model's own (``model.pooling``): mean over real tokens, as
sentence-transformers models such as all-MiniLM-L6-v2 are trained to be read; max; or the
first token. Padding never takes part.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.data.batching import pad
from aiayn.data.labelled import encode_texts


@torch.no_grad()
def embed_texts(
    model, tokenizer, texts: list[str], normalize: bool = False, batch_size: int = 64
) -> Tensor:
    """Embeddings (N, D) of ``texts``: the encoder's states pooled as ``model.config.pooling``
    says (Phuong & Hutter 2022, Algorithm 9, without a head); unit length with ``normalize``.

    Texts are encoded as for classification (the same framing, cut to the model's ``max_len``
    with a warning) and batched by length; row i belongs to ``texts[i]`` and does not depend
    on the other texts. ``model`` is an encoder-only model in eval mode (``load_model_dir``).
    An empty text is embedded as what it is, the framing tokens alone (eos; BERT's [CLS]
    [SEP]), as sentence-transformers embeds it; unlike a class, that is a well-defined
    answer (classification refuses an empty text).
    """
    config = model.config
    if config.family != "encoder-only":
        raise ValueError(f"embeddings need an encoder-only model, not a {config.family} one")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return embed_ids(model, encode_texts(tokenizer, list(texts), config.max_len, "embed"),
                     normalize, batch_size)  # fmt: skip


@torch.no_grad()
def embed_ids(model, ids: list[list[int]], normalize: bool = False, batch_size: int = 64) -> Tensor:
    """Embeddings (N, D) of token id lists as the model reads them (each framed as
    ``encode_texts`` frames a text: ending with eos, at most ``max_len`` ids)."""
    config = model.config
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # little padding per batch
    device = next(model.parameters()).device
    out = torch.empty(len(ids), config.d_model)  # (N, D)
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        tokens = pad([ids[i] for i in rows], config.pad_id).to(device)  # (B, T)
        pooled = model.pool(model.encode(tokens), tokens)  # (B, D)
        out[rows] = pooled.float().cpu()
    return F.normalize(out, dim=-1) if normalize else out
