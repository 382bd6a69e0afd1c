"""Batches by token count, grouped by length (Vaswani et al. 2017 §5.1).

Each epoch's batches are a pure function of (seed, epoch): examples are shuffled, stably
sorted by length, cut into batches of at most ``max_tokens`` padded tokens, and the batches
shuffled. Resuming at (epoch, batch index) therefore replays exactly the same data, and
``shard`` gives each data-parallel rank its own slice of the same batch list.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from aiayn.data.tokenizer import BOS, EOS, PAD


def _to(batch, device):
    """``batch`` with its tensors on ``device`` (the same object when nothing moves)."""
    moved = {
        f.name: getattr(batch, f.name).to(device, non_blocking=True)
        for f in fields(batch)
        if isinstance(getattr(batch, f.name), Tensor) and getattr(batch, f.name).device != device
    }
    return replace(batch, **moved) if moved else batch


def pinned(batch):
    """``batch`` with its tensors in page-locked memory, so that the copy to a GPU runs
    asynchronously (no wait for the GPU's queue to drain); a batch whose tensors are not on
    the CPU as it is."""
    moved = {
        f.name: getattr(batch, f.name).pin_memory()
        for f in fields(batch)
        if isinstance(getattr(batch, f.name), Tensor) and getattr(batch, f.name).is_cpu
    }
    return replace(batch, **moved) if moved else batch


@dataclass
class Batch:
    """A padded translation batch: ``src`` (B, S), decoder input ``tgt_in`` and labels ``tgt_out``
    (B, T) (the target shifted by one, Phuong & Hutter 2022 Algorithm 11)."""

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    index: list[int]

    @property
    def n_tokens(self) -> int:
        """Target tokens that count towards the loss."""
        return int((self.tgt_out != PAD).sum())

    @property
    def efficiency(self) -> float:
        """Share of real (non-padding) tokens among all source and target positions."""
        real = int((self.src != PAD).sum()) + self.n_tokens
        return real / (self.src.numel() + self.tgt_out.numel())

    def to(self, device: torch.device) -> Batch:
        return _to(self, torch.device(device))


@dataclass
class TokenBatch:
    """``inputs`` (B, T) with ``targets``: next tokens or masked originals (B, T, pad = no
    loss) for language models, class ids (B,) for classification."""

    inputs: Tensor
    targets: Tensor

    @property
    def n_tokens(self) -> int:
        if self.targets.dim() == 1:
            return self.targets.numel()
        return int((self.targets != PAD).sum())

    @property
    def efficiency(self) -> float:
        return float((self.inputs != PAD).float().mean())

    def to(self, device: torch.device) -> TokenBatch:
        return _to(self, torch.device(device))


def pad(seqs: Sequence[Sequence[int]], value: int = PAD) -> Tensor:
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def collate(
    pairs: Sequence[tuple[list[int], list[int]]],
    index: list[int],
    frame: tuple[Sequence[int], Sequence[int]] = ((), (EOS,)),
) -> Batch:
    """Pairs of (source ids, target ids) without specials to a padded ``Batch``; each source
    framed by ``frame`` (the ids before and after it: eos after, unless the model's config
    says otherwise, ``ModelConfig.source_frame``)."""
    head, tail = list(frame[0]), list(frame[1])
    src = pad([head + s + tail for s, _ in pairs])
    tgt_in = pad([[BOS] + t for _, t in pairs])
    tgt_out = pad([t + [EOS] for _, t in pairs])
    return Batch(src, tgt_in, tgt_out, index)


def length_batches(
    lengths: Sequence[int], max_tokens: int, seed: int, epoch: int, shuffle: bool = True
) -> list[list[int]]:
    """Index batches whose padded size (len(batch) * longest) stays within ``max_tokens``.

    ``lengths`` is each example's longest side (with specials). An example longer than
    ``max_tokens`` gets a batch of its own.
    """
    order = list(range(len(lengths)))
    rng = random.Random(seed * 1_000_003 + epoch)
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lambda i: lengths[i])  # stable: equal lengths stay shuffled
    batches, current, longest = [], [], 0
    for i in order:
        new_longest = max(longest, lengths[i])
        if current and new_longest * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, new_longest = [], lengths[i]
        current.append(i)
        longest = new_longest
    if current:
        batches.append(current)
    if shuffle:
        rng.shuffle(batches)
    return batches


def shard(batches: list[list[int]], rank: int, world_size: int) -> list[list[int]]:
    """Rank ``rank``'s share: every ``world_size``-th batch, trimmed so all ranks get as many."""
    n = len(batches) // world_size * world_size
    return batches[rank:n:world_size]
