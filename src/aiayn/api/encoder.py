"""``Encoder`` and ``Classifier``: encoder-only models (Phuong & Hutter 2022, Algorithm 9)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from torch import Tensor

from aiayn.api.base import LoadedModel
from aiayn.api.options import check_int
from aiayn.api.preparation import text_list
from aiayn.api.results import Classification
from aiayn.errors import OptionError
from aiayn.infer.classify import (
    average_probabilities,
    check_classifier,
    classifier_labels,
    classify_texts,
)
from aiayn.infer.embed import embed_ids, embed_texts
from aiayn.modeldir import ModelDir


class Encoder(LoadedModel):
    """Sentence embeddings from an encoder-only model::

    enc = aiayn.load("runs/minilm")
    enc.embed(["A moving film."], normalize=True)  # (1, D)
    """

    family = "encoder-only"

    def embed(
        self, texts: Sequence[str], *, normalize: bool = False, batch_size: int = 64
    ) -> Tensor:
        """Embeddings (N, D) of ``texts``: the encoder's final states pooled as the model's
        ``pooling`` says (mean, max or first token), unit length with ``normalize``. Texts
        longer than ``max_len`` are cut, with a warning."""
        check_int("batch_size", batch_size, 1)
        return embed_texts(self.model, self.tokenizer, text_list(texts), normalize, batch_size)

    def embed_ids(
        self, ids: Sequence[Sequence[int]], *, normalize: bool = False, batch_size: int = 64
    ) -> Tensor:
        """Embeddings (N, D) of texts given as their token ids (what the tokenizer gives,
        eos added as ``embed`` adds it); each list of 1 to ``max_text_tokens`` ids of the
        vocabulary."""
        check_int("batch_size", batch_size, 1)
        rows = [list(x) for x in ids]
        vocab, longest = self.config.vocab_size, self.max_text_tokens
        for i, row in enumerate(rows):
            if not row or len(row) > longest:
                raise OptionError(f"ids[{i}]: {len(row)} ids; give 1 to {longest}", "ids")
            if any(not isinstance(t, int) or not 0 <= t < vocab for t in row):
                raise OptionError(f"ids[{i}]: token ids must be integers in [0, {vocab})", "ids")
        framed = [row + [self.config.eos_id] for row in rows]
        return embed_ids(self.model, framed, normalize, batch_size)


class Classifier(Encoder):
    """Label texts with an encoder-only classifier::

    clf = aiayn.load("runs/sentiment/model")
    clf.classify(["A moving film."])[0].label
    """

    def __init__(self, model, tokenizer, path=None, run=None, labels: list[str] | None = None):
        super().__init__(model, tokenizer, path, run)
        self.labels = labels if labels is not None else list((run or {}).get("labels", []))

    @classmethod
    def from_dir(
        cls,
        path: ModelDir | Path | str,
        *,
        quantize: str | None = None,
        device="cpu",
        dtype="float32",
    ):
        directory = ModelDir.open(path)
        check_classifier(directory.config, directory.path)
        classifier_labels(directory, directory.config.n_classes)  # run.json names every class
        return super().from_dir(directory, quantize=quantize, device=device, dtype=dtype)

    def probabilities(self, texts: Sequence[str], *, batch_size: int = 64) -> Tensor:
        """Class probabilities (N, C), columns in ``labels`` order."""
        check_int("batch_size", batch_size, 1)
        where = str(self.path) if self.path else "classify"
        return classify_texts(self.model, self.tokenizer, text_list(texts), batch_size, where)

    def classify(self, texts: Sequence[str], *, batch_size: int = 64) -> list[Classification]:
        """The most probable label of each text, with every label's probability."""
        return [self._result(row) for row in self.probabilities(texts, batch_size=batch_size)]

    def _result(self, row: Tensor) -> Classification:
        best = int(row.argmax())
        return Classification(self.labels[best], dict(zip(self.labels, row.tolist(), strict=True)))


def ensemble_probabilities(
    classifiers: Sequence[Classifier], texts: Sequence[str], *, batch_size: int = 64
) -> tuple[list[str], Tensor]:
    """(labels, probabilities (N, C)) of ``texts`` averaged over ``classifiers``, which must
    share their labels; each reads the texts with its own tokenizer."""
    if not classifiers:
        raise ValueError("no classifier given")
    members = [(str(c.path), c.model, c.tokenizer, c.labels) for c in classifiers]
    return average_probabilities(members, text_list(texts), batch_size)
