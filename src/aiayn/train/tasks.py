"""What the one training loop trains on: data, tokenizer, batches and loss for each task.

``TranslationTask``: an encoder-decoder on a parallel corpus (Phuong & Hutter 2022, Alg. 11).
``LanguageModelTask``: a decoder-only model on running text (Alg. 13).
"""

from __future__ import annotations

import torch

from aiayn.config import RunConfig
from aiayn.data.lm import TokenStream, read_text
from aiayn.data.parallel import encode_split, train_tokenizer
from aiayn.data.tokenizer import PAD, CharTokenizer, Tokenizer
from aiayn.train.objectives import causal_lm_loss, seq2seq_loss


class TranslationTask:
    family = "encoder-decoder"
    loss_fn = staticmethod(seq2seq_loss)

    def __init__(self, run: RunConfig) -> None:
        self.run = run

    def train_tokenizer(self) -> Tokenizer:
        return train_tokenizer(self.run.data)

    def load(self, tokenizer) -> None:
        data = self.run.data
        self.train = encode_split(data, tokenizer, "train", filter_long=True)
        self.valid = encode_split(data, tokenizer, "valid", filter_long=False)

    def train_batches(self, epoch: int) -> list:
        tc = self.run.train
        return self.train.batches(tc.max_tokens, tc.seed, epoch)

    def valid_batches(self) -> list:
        return self.valid.batches(self.run.train.max_tokens, shuffle=False)


class LanguageModelTask:
    family = "decoder-only"
    loss_fn = staticmethod(causal_lm_loss)

    def __init__(self, run: RunConfig) -> None:
        self.run = run
        if run.data.block_size > run.model.max_len and run.model.pos_encoding == "learned":
            raise ValueError(
                f"data.block_size ({run.data.block_size}) exceeds model.max_len "
                f"({run.model.max_len}) of the learned positional encoding"
            )

    def train_tokenizer(self):
        text = read_text(self.run.data.corpus, "train")
        if self.run.data.tokenizer == "char":
            return CharTokenizer.train([text])
        lines = [line for line in text.splitlines() if line.strip()]
        return Tokenizer.train(lines, self.run.data.vocab_size)

    def _stream(self, tokenizer, split: str) -> TokenStream:
        text = read_text(self.run.data.corpus, split)
        if isinstance(tokenizer, CharTokenizer):
            ids = tokenizer.encode([text])[0]
        else:  # line by line keeps sentencepiece's input small; newlines are kept as tokens
            newline = tokenizer.encode(["\n"])[0]
            ids = []
            for line in text.split("\n"):
                ids += tokenizer.encode([line])[0] + newline
        return TokenStream(torch.tensor(ids, dtype=torch.long))

    def load(self, tokenizer) -> None:
        self.train = self._stream(tokenizer, "train")
        self.valid = self._stream(tokenizer, "valid")

    def train_batches(self, epoch: int) -> list:
        tc, data = self.run.train, self.run.data
        return self.train.batches(data.block_size, tc.max_tokens, tc.seed, epoch)

    def valid_batches(self) -> list:
        data = self.run.data
        return self.valid.batches(data.block_size, self.run.train.max_tokens, shuffle=False)


TASKS = {"translation": TranslationTask, "lm": LanguageModelTask}


def make_task(run: RunConfig):
    return TASKS[run.data.task](run)


__all__ = ["PAD", "LanguageModelTask", "TranslationTask", "make_task"]
