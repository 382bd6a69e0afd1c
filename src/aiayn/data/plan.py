"""An epoch's batches planned from the store's length buckets, collated when they are needed.

Vaswani et al. 2017 §5.1 batch sentence pairs "by approximate sequence length". The plan is
that of ``aiayn.data.batching.length_batches`` (shuffle, sort by length, cut by
``max_tokens``, shuffle the batches), computed without a list of every example:

* sorting a shuffled corpus stably by length leaves each length's examples in a random
  order, so the sorted epoch is the length buckets of the store (``TokenStore.order``), each
  permuted by a generator seeded with (seed, epoch, bucket);
* the cut needs only each bucket's length and count: ``cut_buckets`` gives the batches as
  ranges of sorted positions, exactly as the greedy cut over the sorted lengths would;
* the batches are shuffled by a generator seeded with (seed, epoch).

So an epoch's order is a pure function of (seed, epoch), and the memory it takes is that of
the batch ranges plus the permutations of the few buckets in use; nothing grows with the
example count but those. A batch's examples are looked up, and their ids read from the
memory maps, only when ``EpochBatches[i]`` is asked for.

Several sources (the train split repeated ``train_repeat`` times, extra splits) are planned
as one corpus: their buckets of one length are joined, and example ids count on from one
source to the next.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from aiayn.data.store import TokenStore


def cut_buckets(lengths: np.ndarray, counts: np.ndarray, max_tokens: int) -> np.ndarray:
    """Batches as (start, stop) ranges of positions in the length-sorted order.

    ``lengths`` ascending, one per bucket, with its example ``counts``. Same cut as adding
    sorted examples to a batch while (its size + 1) * the longest <= ``max_tokens``; an
    example longer than ``max_tokens`` is a batch of its own.
    """
    starts, stops = [], []
    begin, size = 0, 0  # the open batch: begins at ``begin`` and holds ``size``
    for length, count in zip(lengths.tolist(), counts.tolist(), strict=True):
        k = max(max_tokens // length, 1)  # the most examples of this length in one batch
        if size >= k:  # the open batch cannot take one more of this length
            starts.append(begin)
            stops.append(begin + size)
            begin, size = begin + size, 0
        take = min(count, k - size)
        size += take
        left = count - take
        if left:
            starts.append(begin)
            stops.append(begin + size)
            begin += size
            full = left // k
            if full:
                first = begin + k * np.arange(full, dtype=np.int64)
                starts.extend(first.tolist())
                stops.extend((first + k).tolist())
                begin += full * k
            size = left - full * k
    if size:
        starts.append(begin)
        stops.append(begin + size)
    return np.stack([np.asarray(starts, np.int64), np.asarray(stops, np.int64)], axis=1)


@dataclass(frozen=True)
class Source:
    """One store in the plan; ``first`` is the example id its example 0 gets."""

    store: TokenStore
    first: int


class BucketPlan:
    """The length buckets of one or more stores, joined by length.

    ``max_len``: buckets longer than it are dropped (``drop_long``) or joined into the bucket of
    length ``max_len`` (truncated texts: they all pad to ``max_len``).
    """

    def __init__(self, stores: Sequence[TokenStore], max_len: int | None, drop_long: bool):
        self.sources, first = [], 0
        for store in stores:
            self.sources.append(Source(store, first))
            first += store.n
        segments: dict[int, list[tuple[int, int, int]]] = {}  # length -> (source, start, count)
        for k, src in enumerate(self.sources):
            st = src.store
            for length, start, count in zip(
                st.bucket_lengths.tolist(),
                st.bucket_starts.tolist(),
                st.bucket_counts.tolist(),
                strict=True,
            ):
                if max_len is not None and length > max_len:
                    if drop_long:
                        continue
                    length = max_len
                segments.setdefault(length, []).append((k, start, count))
        self.lengths = np.asarray(sorted(segments), dtype=np.int64)
        self.segments = [segments[length] for length in self.lengths.tolist()]
        self.counts = np.asarray([sum(c for *_, c in s) for s in self.segments], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        self.n = int(self.starts[-1])
        self.dropped = sum(st.n for st in stores) - self.n

    def lookup(self, positions: np.ndarray, perm) -> tuple[np.ndarray, np.ndarray]:
        """(source, example) of each sorted position; ``perm(bucket)`` permutes a bucket."""
        out_src = np.empty(len(positions), np.int64)
        out_idx = np.empty(len(positions), np.int64)
        buckets = np.searchsorted(self.starts, positions, side="right") - 1
        for b in np.unique(buckets).tolist():
            where = np.nonzero(buckets == b)[0]
            q = positions[where] - self.starts[b]
            if perm is not None:
                q = perm(b)[q]
            seg = self.segments[b]
            ends = np.cumsum([c for *_, c in seg])
            which = np.searchsorted(ends, q, side="right")
            for s in np.unique(which).tolist():
                hit = which == s
                k, start, count = seg[s]
                r = q[hit] - (ends[s] - count)
                out_src[where[hit]] = k
                out_idx[where[hit]] = self.sources[k].store.order[start + r]
        return out_src, out_idx


class EpochBatches(Sequence):
    """One epoch's batches in training order; ``self[i]`` collates batch i from the maps.

    A slice is a view of the same plan (``group[rank::world_size]`` is a rank's share, and
    nothing is read for the other ranks' batches). ``n_tokens(i)`` is batch i's target token
    count, read from the offsets alone.
    """

    def __init__(
        self,
        plan: BucketPlan,
        ranges: np.ndarray,
        collate: Callable,
        count_tokens: Callable,
        seed: int,
        epoch: int,
        shuffle: bool,
        order: np.ndarray | None = None,
    ) -> None:
        self.plan, self.ranges, self.collate_fn = plan, ranges, collate
        self.count_tokens = count_tokens
        self.seed, self.epoch, self.shuffle = seed, epoch, shuffle
        self.order = np.arange(len(ranges)) if order is None else order
        self._perms: OrderedDict[int, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self.order)

    def _view(self, order: np.ndarray) -> EpochBatches:
        view = EpochBatches(
            self.plan,
            self.ranges,
            self.collate_fn,
            self.count_tokens,
            self.seed,
            self.epoch,
            self.shuffle,
            order,
        )
        view._perms = self._perms  # one cache for the epoch
        return view

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self._view(self.order[i])
        return self.collate_fn(self, i)

    def _perm(self, bucket: int) -> np.ndarray:
        """The permutation of ``bucket`` this epoch (the last 16 used are kept)."""
        if bucket in self._perms:
            self._perms.move_to_end(bucket)
            return self._perms[bucket]
        rng = np.random.default_rng([self.seed, self.epoch, bucket])
        perm = rng.permutation(int(self.plan.counts[bucket]))
        self._perms[bucket] = perm
        if len(self._perms) > 16:
            self._perms.popitem(last=False)
        return perm

    def examples(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Batch i's examples, in sorted order: the source and the index in its store."""
        start, stop = self.ranges[self.order[i]].tolist()
        positions = np.arange(start, stop, dtype=np.int64)
        return self.plan.lookup(positions, self._perm if self.shuffle else None)

    def read(self, i: int, fields: Sequence[str]) -> tuple[dict, list[int]]:
        """Batch i's token ids per field (a list of arrays each) and its example ids (counted
        over all sources)."""
        src, idx = self.examples(i)
        sources = [self.plan.sources[k] for k in src.tolist()]
        seqs = {f: [] for f in fields}
        for s, j in zip(sources, idx.tolist(), strict=True):
            for f in fields:
                off = s.store.offsets[f]
                seqs[f].append(s.store.ids[f][off[j] : off[j + 1]])
        ids = [s.first + j for s, j in zip(sources, idx.tolist(), strict=True)]
        return seqs, ids

    def n_tokens(self, i: int) -> int:
        """Batch i's tokens that count towards the loss (``count_tokens(store, index)``)."""
        src, idx = self.examples(i)
        return sum(
            self.count_tokens(self.plan.sources[k].store, idx[src == k])
            for k in np.unique(src).tolist()
        )

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def release(self) -> None:
        """Drop the pages read so far from this process's resident set."""
        for src in self.plan.sources:
            src.store.release()


def epoch_batches(
    plan: BucketPlan,
    max_tokens: int,
    seed: int,
    epoch: int,
    shuffle: bool,
    collate: Callable,
    count_tokens: Callable,
) -> EpochBatches:
    """The epoch's batches: cut from the buckets, then (``shuffle``) shuffled."""
    ranges = cut_buckets(plan.lengths, plan.counts, max_tokens)
    order = None
    if shuffle:
        order = np.random.default_rng([seed, epoch]).permutation(len(ranges))
    return EpochBatches(plan, ranges, collate, count_tokens, seed, epoch, shuffle, order)
