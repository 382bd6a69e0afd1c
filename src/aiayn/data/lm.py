"""Running text for language modelling, cut into blocks (Phuong & Hutter 2022, Algorithm 13).

The files (``{split}.txt.gz``) are read by ``aiayn.data.files.read_text``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.data.batching import TokenBatch


@dataclass
class TokenStream:
    """One split as a single stream of token ids."""

    ids: Tensor  # (N,)

    def batches(
        self, block_size: int, max_tokens: int, seed: int = 0, epoch: int = 0, shuffle: bool = True
    ) -> list[TokenBatch]:
        """Non-overlapping blocks of ``block_size + 1`` tokens, ``max_tokens // block_size`` a
        batch. Training epochs start at a random offset and shuffle the blocks, both drawn
        from (seed, epoch), so an epoch can be replayed exactly."""
        n = self.ids.numel()
        span = block_size + 1
        if n < span:
            raise ValueError(f"the text has {n} tokens, fewer than data.block_size + 1 = {span}")
        rng = random.Random(seed * 1_000_003 + epoch)
        offset = rng.randrange(block_size) if shuffle and n - span >= block_size else 0
        starts = list(range(offset, n - span + 1, block_size))
        if shuffle:
            rng.shuffle(starts)
        per_batch = max(max_tokens // block_size, 1)
        out = []
        for i in range(0, len(starts), per_batch):
            blocks = torch.stack([self.ids[s : s + span] for s in starts[i : i + per_batch]])
            out.append(TokenBatch(blocks[:, :-1], blocks[:, 1:]))  # (B, T), (B, T)
        return out
