"""Running text for language modelling, cut into blocks (Phuong & Hutter 2022, Algorithm 13).

The split's file (``{split}.txt.gz``) is read line by line in chunks and encoded into a
token store (``aiayn.data.store``; one example a line, each line's ids followed by the
newline's, so the store's ids file is the text's token stream). Training reads blocks of
that stream from the memory map: a text of any size loads in bounded memory.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from aiayn.data.batching import TokenBatch
from aiayn.data.files import iter_line_chunks, read_text
from aiayn.data.store import Chunk, input_key, open_or_write, write_store
from aiayn.data.tokenizer import CharTokenizer, Tokenizer

CHUNK_LINES = 20_000
TOKENIZER_SAMPLE = 2_000_000  # lines a BPE tokenizer trains on, at most


def text_path(corpus: str | Path, split: str) -> Path:
    path = Path(corpus) / f"{split}.txt.gz"
    if not path.is_file():
        read_text(corpus, split)  # raises, saying what a language-model corpus holds
    return path


def train_tokenizer(corpus: str | Path, kind: str, vocab_size: int, seed: int = 1):
    """A character vocabulary of the whole train split, or a BPE on up to
    ``TOKENIZER_SAMPLE`` of its non-blank lines (a uniform sample drawn while streaming)."""
    path = text_path(corpus, "train")
    if kind == "char":
        chars = {"\n"}  # every line of the stream ends with one
        for lines in iter_line_chunks(path):
            for line in lines:
                chars.update(line)
        return CharTokenizer(sorted(chars))
    rng, sample, seen = random.Random(seed), [], 0
    for lines in iter_line_chunks(path):
        for line in lines:
            if not line.strip():
                continue
            seen += 1
            if len(sample) < TOKENIZER_SAMPLE:
                sample.append(line)
            elif (j := rng.randrange(seen)) < TOKENIZER_SAMPLE:
                sample[j] = line
    return Tokenizer.train(sample, vocab_size)


def _chunks(tokenizer, path: Path) -> Iterator[Chunk]:
    newline = tokenizer.encode(["\n"])[0]
    for lines in iter_line_chunks(path):
        for i in range(0, len(lines), CHUNK_LINES):
            ids = tokenizer.encode(lines[i : i + CHUNK_LINES])
            yield Chunk({"text": [x + newline for x in ids]})


def stream_key(corpus: str | Path, split: str, tokenizer_sha256: str) -> dict:
    return input_key([text_path(corpus, split)], tokenizer_sha256, kind="text")


def load_stream(
    corpus: str | Path,
    split: str,
    tokenizer,
    root: Path | None = None,
    tokenizer_sha256: str = "",
    write: bool = True,
) -> TokenStream:
    """The split's token stream from its store under ``root`` (written, or waited for while
    another process writes it, when missing, outdated or damaged; see
    ``parallel.encode_split``)."""
    keep = None
    if root is None:
        keep = tempfile.TemporaryDirectory(prefix="aiayn-store-")
        root = Path(keep.name)
    key = stream_key(corpus, split, tokenizer_sha256)

    def write_text(directory: Path) -> None:
        chunks = _chunks(tokenizer, text_path(corpus, split))
        write_store(directory, key, ("text",), tokenizer.vocab_size, chunks)

    store = open_or_write(Path(root) / split, key, write_text, write, tokenizer.vocab_size)
    stream = TokenStream(store.ids["text"])
    stream._keep = (store, keep)
    return stream


class TokenStream:
    """One split as a single stream of token ids (a tensor, or a memory-mapped array)."""

    def __init__(self, ids) -> None:
        self.ids = ids.numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids)

    def batches(
        self, block_size: int, max_tokens: int, seed: int = 0, epoch: int = 0, shuffle: bool = True
    ) -> BlockBatches:
        """Non-overlapping blocks of ``block_size + 1`` tokens, ``max_tokens // block_size`` a
        batch. Training epochs start at a random offset and shuffle the blocks, both drawn
        from (seed, epoch), so an epoch can be replayed exactly."""
        n = len(self.ids)
        span = block_size + 1
        if n < span:
            raise ValueError(f"the text has {n} tokens, fewer than data.block_size + 1 = {span}")
        rng = np.random.default_rng([seed, epoch])
        offset = int(rng.integers(block_size)) if shuffle and n - span >= block_size else 0
        n_blocks = (n - span - offset) // block_size + 1
        order = rng.permutation(n_blocks) if shuffle else np.arange(n_blocks)
        per_batch = max(max_tokens // block_size, 1)
        return BlockBatches(self.ids, offset, block_size, order, per_batch)


class BlockBatches(Sequence):
    """An epoch's blocks, ``per_batch`` a batch, read from the stream when asked for."""

    def __init__(self, ids, offset, block_size, order, per_batch, batch_ids=None) -> None:
        self.ids, self.offset, self.block_size = ids, offset, block_size
        self.order, self.per_batch = order, per_batch
        n = -(-len(order) // per_batch)
        self.batch_ids = np.arange(n) if batch_ids is None else batch_ids

    def __len__(self) -> int:
        return len(self.batch_ids)

    def _blocks(self, i: int) -> np.ndarray:
        b = int(self.batch_ids[i])
        return self.order[b * self.per_batch : (b + 1) * self.per_batch]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return BlockBatches(
                self.ids,
                self.offset,
                self.block_size,
                self.order,
                self.per_batch,
                self.batch_ids[i],
            )
        starts = self.offset + self._blocks(i) * self.block_size
        span = np.arange(self.block_size + 1)
        blocks = torch.from_numpy(self.ids[starts[:, None] + span].astype(np.int64))
        return TokenBatch(blocks[:, :-1], blocks[:, 1:])  # (B, T), (B, T)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def n_tokens(self, i: int) -> int:
        return len(self._blocks(i)) * self.block_size
