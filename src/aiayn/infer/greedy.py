"""Greedy decoding for the encoder-decoder, with the KV cache (Phuong & Hutter 2022, Alg. 14
with temperature -> 0)."""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.data.tokenizer import BOS, EOS, PAD


@torch.no_grad()
def greedy_decode(
    model, src: Tensor, max_len_offset: int = 50, max_len: int | None = None
) -> Tensor:
    """Most likely next token at each step until eos; (B, S) sources to (B, L) token ids.

    Each sentence stops at its own source length + ``max_len_offset`` (Vaswani et al. 2017
    §6.1), or at ``max_len``. A finished sentence leaves the batch (its rows of the KV cache
    go too), so a batch costs what its live sentences cost and every sentence decodes as it
    would alone. The output holds no bos, ends with eos where one was made, and is padded.
    """
    model.eval()
    memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    state = model.new_state(src_mask)
    b, device = src.size(0), src.device
    if max_len is None:
        limit = (src != PAD).sum(1) + max_len_offset  # (B,)
    else:
        limit = torch.full((b,), max_len, dtype=torch.long, device=device)
    if model.config.pos_encoding == "learned":  # no positions past the learned table
        limit = limit.clamp(max=model.config.max_len)
    steps = int(limit.max()) if b else 0
    out = torch.full((b, steps), PAD, dtype=torch.long, device=device)
    rows = torch.arange(b, device=device)  # (N,) the sentence of each live row
    token = torch.full((b, 1), BOS, dtype=torch.long, device=device)
    width = 0
    for step in range(steps):
        logits = model.decode(token, memory, state=state)[:, -1]  # (N, V)
        token = logits.argmax(-1, keepdim=True)  # (N, 1)
        out[rows, step] = token[:, 0]
        width = step + 1
        done = (token[:, 0] == EOS) | (limit[rows] <= width)  # (N,)
        if done.any():
            keep = (~done).nonzero().squeeze(1)  # (N',)
            if keep.numel() == 0:
                break
            rows, token = rows[keep], token[keep]
            state.reorder(keep)  # memory itself is read on the first step only
    return out[:, :width]  # (B, L)
