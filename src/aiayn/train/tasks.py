"""What the one training loop trains on: data, tokenizer, batches and loss for each task.

``TranslationTask``: an encoder-decoder on a parallel corpus (Phuong & Hutter 2022, Alg. 11).
``LanguageModelTask``: a decoder-only model on running text (Alg. 13).
``MaskedLMTask``: an encoder-only model pretrained by masking (Alg. 12).
``ClassificationTask``: an encoder-only model with a pooled classifier head.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.config import RunConfig
from aiayn.data import lm
from aiayn.data.batching import TokenBatch
from aiayn.data.files import read_labelled
from aiayn.data.labelled import LabelledTexts
from aiayn.data.parallel import encode_split, train_tokenizer
from aiayn.data.tokenizer import MASK, PAD, CharTokenizer, Tokenizer
from aiayn.train.objectives import (
    causal_lm_loss,
    classification_loss,
    mask_tokens,
    mlm_loss,
    seq2seq_loss,
)


@dataclass(frozen=True)
class StoreAccess:
    """Where a task's token stores live (``root``; a temporary directory when None), the
    tokenizer they are keyed to, and whether this process writes them (one process does; the
    others wait for it and map what it wrote)."""

    root: Path | None = None
    tokenizer_sha256: str = ""
    write: bool = True

    def arguments(self) -> dict:
        return {"root": self.root, "tokenizer_sha256": self.tokenizer_sha256, "write": self.write}


class TranslationTask:
    family = "encoder-decoder"
    loss_fn = staticmethod(seq2seq_loss)

    def __init__(self, run: RunConfig) -> None:
        self.run = run

    def model_overrides(self) -> dict:
        return {}

    def saved_extra(self) -> dict:
        return {}

    def train_tokenizer(self) -> Tokenizer:
        return train_tokenizer(self.run.data)

    def load(self, tokenizer, store: StoreAccess | None = None) -> None:
        """Open (or write) the token stores of the train and valid splits."""
        data, where = self.run.data, (store or StoreAccess()).arguments()
        where["frame"] = self.run.model.source_frame  # sources as the model reads them
        self.train = encode_split(data, tokenizer, "train", filter_long=True, **where)
        self.valid = encode_split(data, tokenizer, "valid", filter_long=False, **where)

    def train_batches(self, epoch: int) -> list:
        tc = self.run.train
        return self.train.batches(tc.max_tokens, tc.seed, epoch)

    def valid_batches(self) -> list:
        return self.valid.batches(self.run.train.max_tokens, shuffle=False)


class LanguageModelTask:
    family = "decoder-only"
    loss_fn = staticmethod(causal_lm_loss)

    model_overrides = TranslationTask.model_overrides
    saved_extra = TranslationTask.saved_extra

    def __init__(self, run: RunConfig) -> None:
        self.run = run
        if run.data.block_size > run.model.max_len and run.model.pos_encoding == "learned":
            raise ValueError(
                f"data.block_size ({run.data.block_size}) exceeds model.max_len "
                f"({run.model.max_len}) of the learned positional encoding"
            )

    def train_tokenizer(self):
        data = self.run.data
        return lm.train_tokenizer(data.corpus, data.tokenizer, data.vocab_size)

    def load(self, tokenizer, store: StoreAccess | None = None) -> None:
        """Open (or write) the token streams of the train and valid splits."""
        where = (store or StoreAccess()).arguments()
        self.train = lm.load_stream(self.run.data.corpus, "train", tokenizer, **where)
        self.valid = lm.load_stream(self.run.data.corpus, "valid", tokenizer, **where)

    def train_batches(self, epoch: int) -> list:
        tc, data = self.run.train, self.run.data
        return self.train.batches(data.block_size, tc.max_tokens, tc.seed, epoch)

    def valid_batches(self) -> list:
        data = self.run.data
        return self.valid.batches(data.block_size, self.run.train.max_tokens, shuffle=False)


class ClassificationTask:
    family = "encoder-only"
    loss_fn = staticmethod(classification_loss)

    def __init__(self, run: RunConfig) -> None:
        self.run = run
        data = run.data
        self.train_pairs = read_labelled(data.corpus, "train")
        self.labels = sorted({label for _, label in self.train_pairs})
        # extra labelled splits (e.g. a sentiment lexicon) join the training data only
        self.extra_pairs = []
        for extra in data.extra_train:
            pairs = read_labelled(data.corpus, extra)
            unknown = sorted({label for _, label in pairs} - set(self.labels))
            if unknown:
                raise ValueError(
                    f"{data.corpus}/{extra}.tsv.gz: label(s) {', '.join(unknown)} are not in "
                    f"the train split's labels ({', '.join(self.labels)})"
                )
            self.extra_pairs += pairs
        if len(self.labels) < 2:
            raise ValueError(f"{run.data.corpus}: training data needs two or more labels")

    def model_overrides(self) -> dict:
        return {"n_classes": len(self.labels)}

    def saved_extra(self) -> dict:
        return {"labels": self.labels}

    def train_tokenizer(self):
        texts = [text for text, _ in self.train_pairs]
        if self.run.data.tokenizer == "char":
            return CharTokenizer.train(texts)
        return Tokenizer.train(texts, self.run.data.vocab_size, case_fold=self.run.data.lowercase)

    def load(self, tokenizer, store: StoreAccess | None = None) -> None:
        """Encode the texts in memory (labelled corpora are small: see docs/corpora.md)."""
        data = self.run.data
        valid = read_labelled(data.corpus, "valid")
        pairs = self.train_pairs * data.train_repeat + self.extra_pairs
        self.train = LabelledTexts(pairs, tokenizer, self.labels, data.max_len, "train")
        self.valid = LabelledTexts(valid, tokenizer, self.labels, data.max_len, "valid")

    def train_batches(self, epoch: int) -> list:
        tc = self.run.train
        return self.train.batches(tc.max_tokens, tc.seed, epoch)

    def valid_batches(self) -> list:
        return self.valid.batches(self.run.train.max_tokens, shuffle=False)


class MaskedLMTask(ClassificationTask):
    """Masked-LM pretraining on the texts of a labelled corpus (the labels are not used)."""

    loss_fn = staticmethod(mlm_loss)

    def model_overrides(self) -> dict:
        return {"n_classes": 0}

    def saved_extra(self) -> dict:
        return {}

    def load(self, tokenizer, store: StoreAccess | None = None) -> None:
        super().load(tokenizer, store)
        self.vocab_size = tokenizer.vocab_size

    def _masked(self, batches: list, seed: int) -> list:
        g = torch.Generator().manual_seed(seed)
        p = self.run.data.mask_prob
        out = []
        for b in batches:
            inputs, targets = mask_tokens(b.inputs, self.vocab_size, MASK + 1, p, g)
            out.append(TokenBatch(inputs, targets))
        return out

    def train_batches(self, epoch: int) -> list:
        tc = self.run.train
        return self._masked(super().train_batches(epoch), tc.seed * 1_000_003 + epoch)

    def valid_batches(self) -> list:
        return self._masked(super().valid_batches(), 12345)


TASKS = {
    "translation": TranslationTask,
    "lm": LanguageModelTask,
    "classification": ClassificationTask,
    "mlm": MaskedLMTask,
}


def make_task(run: RunConfig):
    return TASKS[run.data.task](run)


__all__ = [
    "PAD",
    "ClassificationTask",
    "LanguageModelTask",
    "MaskedLMTask",
    "TranslationTask",
    "make_task",
]
