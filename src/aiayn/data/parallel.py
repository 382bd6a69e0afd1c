"""A tokenized parallel corpus, ready to be cut into token batches."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from aiayn.config import DataConfig
from aiayn.data.batching import Batch, collate, length_batches, shard
from aiayn.data.files import load_split
from aiayn.data.tokenizer import Tokenizer


@dataclass
class EncodedSplit:
    texts: list[tuple[str, str]]
    ids: list[tuple[list[int], list[int]]]

    @property
    def lengths(self) -> list[int]:
        """Longest side of each pair, counting the eos / bos that ``collate`` adds."""
        return [max(len(s), len(t)) + 1 for s, t in self.ids]

    def batches(
        self,
        max_tokens: int,
        seed: int = 0,
        epoch: int = 0,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
    ) -> list[Batch]:
        groups = length_batches(self.lengths, max_tokens, seed, epoch, shuffle)
        if world_size > 1:
            groups = shard(groups, rank, world_size)
        return [collate([self.ids[i] for i in g], g) for g in groups]


def load_texts(config: DataConfig, split: str) -> list[tuple[str, str]]:
    return load_split(Path(config.corpus), split, config.src_lang, config.tgt_lang)


def train_tokenizer(config: DataConfig) -> Tokenizer:
    """A shared BPE on both sides of the training data (Vaswani et al. 2017 §5.1)."""
    pairs = load_texts(config, "train")
    for extra in config.extra_train:
        pairs = pairs + load_texts(config, extra)
    return Tokenizer.train([t for pair in pairs for t in pair], config.vocab_size)


def encode_split(
    config: DataConfig, tokenizer: Tokenizer, split: str, filter_long: bool
) -> EncodedSplit:
    """Tokenize ``split`` (plus ``extra_train`` splits for train); drop over-long training pairs."""
    texts = load_texts(config, split)
    if split == "train":
        texts = texts * config.train_repeat
        for extra in config.extra_train:
            texts = texts + load_texts(config, extra)
    src = tokenizer.encode([s for s, _ in texts])
    tgt = tokenizer.encode_target([t for _, t in texts])  # Marian: the target model
    pairs = list(zip(src, tgt, strict=True))
    if filter_long:
        keep = [i for i, (s, t) in enumerate(pairs) if max(len(s), len(t)) + 1 <= config.max_len]
        if len(keep) < len(pairs):
            warnings.warn(
                f"{split}: dropped {len(pairs) - len(keep)} of {len(pairs)} pairs longer than "
                f"data.max_len={config.max_len} tokens",
                stacklevel=2,
            )
        texts = [texts[i] for i in keep]
        pairs = [pairs[i] for i in keep]
    return EncodedSplit(texts, pairs)
