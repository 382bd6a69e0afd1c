"""Labelled texts encoded for classification and masked-LM pretraining.

The files (``label<TAB>text`` per line) are read by ``aiayn.data.files.read_labelled``.
"""

from __future__ import annotations

import warnings

import torch

from aiayn.data.batching import TokenBatch, length_batches, pad
from aiayn.data.tokenizer import EOS
from aiayn.errors import UserError


def is_blank(text: str) -> bool:
    """An empty text, or one of whitespace only: nothing for a model to read."""
    return not text.strip()


def refuse_blank(texts: list[str], what: str, first_index: int = 0) -> None:
    """Raise ``UserError`` naming the first empty (or whitespace-only) text, counted from 1
    (+ ``first_index``): a class or an embedding of nothing is no answer."""
    for i, text in enumerate(texts):
        if is_blank(text):
            raise UserError(
                f"text {first_index + i + 1} is empty: there is nothing to {what} "
                "(leave it out, or give it some words)"
            )


def encode_texts(tokenizer, texts: list[str], max_len: int, where: str) -> list[list[int]]:
    """Token ids of ``texts``, each cut to ``max_len - 1`` tokens and ending with eos.

    A text that did not fit is truncated with a warning that counts them (never an error).
    """
    ids = tokenizer.encode(texts)
    too_long = sum(len(x) + 1 > max_len for x in ids)
    if too_long:
        warnings.warn(
            f"{where}: {too_long} texts truncated to {max_len} tokens (of {len(ids)})",
            stacklevel=3,
        )
    return [x[: max_len - 1] + [EOS] for x in ids]


class LabelledTexts:
    """Texts encoded (each ending with eos), truncated to ``max_len``, with class ids."""

    def __init__(self, pairs, tokenizer, labels: list[str], max_len: int, where: str) -> None:
        index = {name: i for i, name in enumerate(labels)}
        unknown = sorted({label for _, label in pairs} - set(index))
        if unknown:
            raise ValueError(f"{where}: labels {unknown} not seen in training ({labels})")
        self.ids = encode_texts(tokenizer, [text for text, _ in pairs], max_len, where)
        self.labels = torch.tensor([index[label] for _, label in pairs], dtype=torch.long)

    def batches(
        self, max_tokens: int, seed: int = 0, epoch: int = 0, shuffle: bool = True
    ) -> list[TokenBatch]:
        groups = length_batches([len(x) for x in self.ids], max_tokens, seed, epoch, shuffle)
        return [TokenBatch(pad([self.ids[i] for i in g]), self.labels[g]) for g in groups]
