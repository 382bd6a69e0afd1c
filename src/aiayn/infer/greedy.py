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

    Stops at source length + ``max_len_offset`` (Vaswani et al. 2017 §6.1), or ``max_len``.
    Finished rows are padded; the output holds no bos and ends with eos where one was made.
    """
    model.eval()
    memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    state = model.new_state(src_mask)
    b = src.size(0)
    src_len = int((src != PAD).sum(1).max())
    limit = src_len + max_len_offset if max_len is None else max_len
    if model.config.pos_encoding == "learned":  # no positions past the learned table
        limit = min(limit, model.config.max_len)
    token = torch.full((b, 1), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    out = []
    for _ in range(limit):
        logits = model.decode(token, memory, state=state)[:, -1]  # (B, V)
        token = logits.argmax(-1, keepdim=True)  # (B, 1)
        token = token.masked_fill(done[:, None], PAD)
        out.append(token)
        done |= token[:, 0] == EOS
        if done.all():
            break
    return torch.cat(out, dim=1)  # (B, L)
