"""A parallel corpus in token stores, cut into token batches (Vaswani et al. 2017 §5.1).

Each split's files (``{split}.{src,tgt}.gz``) are read in chunks, encoded with the run's
tokenizer (sentencepiece encodes a chunk on every core) and appended to a token store
(``aiayn.data.store``); training then plans its batches from the store's length buckets
(``aiayn.data.plan``) and collates each batch from the memory maps when it is needed. The
tokenizer trains on a bounded sample of the training text, drawn while streaming.
"""

from __future__ import annotations

import functools
import queue
import random
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from aiayn.config import DataConfig
from aiayn.data.batching import Batch, collate, shard
from aiayn.data.files import iter_parallel, load_split
from aiayn.data.plan import BucketPlan, EpochBatches, epoch_batches
from aiayn.data.store import Chunk, TokenStore, input_key, open_or_write, write_store
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError

CHUNK_PAIRS = 20_000  # pairs encoded at a time
TOKENIZER_SAMPLE = 2_000_000  # texts (both sides) the tokenizer trains on, at most


def split_paths(config: DataConfig, split: str) -> tuple[Path, Path]:
    """The two files of ``split``; a missing one is a FileNotFoundError saying what exists."""
    corpus_dir = Path(config.corpus)
    paths = tuple(corpus_dir / f"{split}.{lang}.gz" for lang in (config.src_lang, config.tgt_lang))
    if not all(p.is_file() for p in paths):
        load_split(corpus_dir, split, config.src_lang, config.tgt_lang)  # raises, explaining
    return paths


def load_texts(config: DataConfig, split: str) -> list[tuple[str, str]]:
    """Every pair of ``split`` in memory (for small splits: evaluation, tests)."""
    return load_split(Path(config.corpus), split, config.src_lang, config.tgt_lang)


def iter_pairs(config: DataConfig, split: str) -> Iterator[list[tuple[str, str]]]:
    return iter_parallel(*split_paths(config, split))


def training_splits(config: DataConfig) -> list[str]:
    return ["train", *config.extra_train]


def sample_texts(config: DataConfig, limit: int = TOKENIZER_SAMPLE, seed: int = 1) -> list[str]:
    """Up to ``limit`` texts (sources and targets) of the training splits, drawn uniformly
    while streaming (reservoir sampling); all of them, in order, when there are fewer."""
    rng = random.Random(seed)
    sample: list[str] = []
    seen = 0
    for split in training_splits(config):
        for pairs in iter_pairs(config, split):
            for pair in pairs:
                for text in pair:
                    seen += 1
                    if len(sample) < limit:
                        sample.append(text)
                    else:
                        j = rng.randrange(seen)
                        if j < limit:
                            sample[j] = text
    return sample


def train_tokenizer(config: DataConfig) -> Tokenizer:
    """A shared BPE on both sides of the training data (Vaswani et al. 2017 §5.1)."""
    return Tokenizer.train(sample_texts(config), config.vocab_size)


def read_ahead(items: Iterator, depth: int = 2) -> Iterator:
    """``items``, produced by a background thread up to ``depth`` ahead: the files are read
    and decoded while sentencepiece encodes the chunk before (it leaves the GIL)."""
    done = object()
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        ready.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            ready.put(done)
        except BaseException as error:  # raised in the reading thread, re-raised here
            ready.put(error)

    thread = threading.Thread(target=produce, name="aiayn-read-ahead", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            try:
                ready.get_nowait()
            except queue.Empty:
                thread.join(timeout=0.05)


def encoded_chunks(tokenizer, pairs: Iterator[list[tuple[str, str]]]) -> Iterator[Chunk]:
    """``pairs`` encoded, ``CHUNK_PAIRS`` at a time (the target with the target tokenizer)."""
    buffer: list[tuple[str, str]] = []
    for chunk in read_ahead(pairs):
        buffer += chunk
        while len(buffer) >= CHUNK_PAIRS:
            head, buffer = buffer[:CHUNK_PAIRS], buffer[CHUNK_PAIRS:]
            yield _encode(tokenizer, head)
    if buffer:
        yield _encode(tokenizer, buffer)


def _encode(tokenizer, pairs: list[tuple[str, str]]) -> Chunk:
    src = tokenizer.encode([s for s, _ in pairs])
    tgt = tokenizer.encode_target([t for _, t in pairs])  # Marian: the target model
    return Chunk({"src": src, "tgt": tgt})


def split_key(config: DataConfig, split: str, tokenizer_sha256: str) -> dict:
    return input_key(split_paths(config, split), tokenizer_sha256, kind="parallel")


def build_store(config: DataConfig, split: str, tokenizer, key: dict, directory: Path) -> Path:
    """Encode ``split`` into a store at ``directory`` (streaming; all or nothing)."""
    chunks = encoded_chunks(tokenizer, iter_pairs(config, split))
    return write_store(directory, key, ("src", "tgt"), tokenizer.vocab_size, chunks)


def collate_pairs(batches: EpochBatches, i: int, frame=None) -> Batch:
    """Batch i of an epoch, padded by ``collate``: source + eos (or as ``frame`` frames it),
    bos + target, target + eos."""
    seqs, index = batches.read(i, ("src", "tgt"))
    pairs = [(s.tolist(), t.tolist()) for s, t in zip(seqs["src"], seqs["tgt"], strict=True)]
    return collate(pairs, index) if frame is None else collate(pairs, index, frame)


def target_tokens(store: TokenStore, index: np.ndarray) -> int:
    """Target tokens of these examples that count towards the loss (each + eos)."""
    return int(store.lengths("tgt", index).sum()) + len(index)


class ParallelData:
    """Splits' stores planned as one corpus (the train split ``train_repeat`` times, then
    ``extra_train``); over-long pairs dropped with ``filter_long`` (a warning counts them)."""

    def __init__(
        self,
        stores: list[TokenStore],
        max_len: int,
        filter_long: bool,
        corpus: str = "",
        split: str = "",
        frame: tuple[list[int], list[int]] | None = None,
    ) -> None:
        self.stores = stores
        self.frame = frame  # how a source is framed (None: eos after it)
        self.plan = BucketPlan(stores, max_len if filter_long else None, drop_long=True)
        total = sum(s.n for s in stores)
        if filter_long and total and not self.plan.n:
            raise UserError(
                f"{corpus}: every one of the {total} {split} pairs is longer than "
                f"data.max_len = {max_len} tokens, so nothing is left to train on; raise "
                "data.max_len"
            )
        if self.plan.dropped:
            warnings.warn(
                f"{split}: dropped {self.plan.dropped} of {total} pairs longer than "
                f"data.max_len={max_len} tokens",
                stacklevel=3,
            )

    def __len__(self) -> int:
        return self.plan.n

    def batches(
        self,
        max_tokens: int,
        seed: int = 0,
        epoch: int = 0,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
    ) -> EpochBatches:
        collate = collate_pairs
        if self.frame is not None:
            collate = functools.partial(collate_pairs, frame=self.frame)
        out = epoch_batches(self.plan, max_tokens, seed, epoch, shuffle, collate, target_tokens)
        return shard(out, rank, world_size) if world_size > 1 else out


def encode_split(
    config: DataConfig,
    tokenizer,
    split: str,
    filter_long: bool,
    root: Path | None = None,
    tokenizer_sha256: str = "",
    write: bool = True,
    frame: tuple[list[int], list[int]] | None = None,
) -> ParallelData:
    """``split`` (with ``train_repeat`` and ``extra_train`` for train) as ``ParallelData``.

    Its stores live under ``root``, keyed to ``tokenizer_sha256`` and the split's files, their
    content checked against the digests written with them and the tokenizer's vocabulary:
    one that is missing, outdated or damaged is written (``write``) or waited for (another
    process writes it). Without ``root``, in a temporary directory that lives as long as the
    result. ``frame``: the ids before and after each source (``ModelConfig.source_frame``;
    None: eos after it).
    """
    keep = None
    if root is None:
        keep = tempfile.TemporaryDirectory(prefix="aiayn-store-")
        root = Path(keep.name)
    names = training_splits(config) if split == "train" else [split]
    stores = {}
    for name in names:
        key = split_key(config, name, tokenizer_sha256)
        build = lambda directory, name=name, key=key: build_store(  # noqa: E731
            config, name, tokenizer, key, directory
        )
        stores[name] = open_or_write(Path(root) / name, key, build, write, tokenizer.vocab_size)
    ordered = [stores[names[0]]] * (config.train_repeat if split == "train" else 1)
    ordered += [stores[n] for n in names[1:]]
    data = ParallelData(ordered, config.max_len, filter_long, config.corpus, split, frame)
    data._tempdir = keep  # removed with the data
    return data
