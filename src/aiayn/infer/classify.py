"""Text classification with one encoder-only classifier or an ensemble of them."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from aiayn.data.batching import pad
from aiayn.data.labelled import encode_texts, refuse_blank
from aiayn.data.tokenizer import warn_unknown_characters
from aiayn.errors import UserError
from aiayn.modeldir import ModelDir

CLASSIFY_FITS = {
    "encoder-decoder": "aiayn translate, evaluate or attention",
    "decoder-only": "aiayn generate",
    "encoder-only": "train with train.init_from = it (a pretrained encoder)",
}


def check_classifier(config, model_dir: Path) -> None:
    """A ``UserError`` naming the family, unless ``config`` is an encoder-only classifier."""
    if config.family != "encoder-only" or not config.n_classes:
        head = " without a classifier head" if config.family == "encoder-only" else ""
        raise UserError(
            f"{model_dir} holds no text classifier but a model of the {config.family} "
            f"family{head}; classify needs an encoder-only classifier (this directory fits: "
            f"{CLASSIFY_FITS[config.family]})"
        )


def classifier_labels(model_dir: ModelDir | Path, n_classes: int) -> list[str]:
    """The class names run.json records for a classifier of ``n_classes`` classes."""
    directory = ModelDir.open(model_dir)
    labels = directory.run.get("labels")
    run_file = directory.path / "run.json"
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise UserError(f"{run_file}: no 'labels' list (the class names of the classifier)")
    if len(labels) != n_classes:
        raise UserError(
            f"{run_file}: {len(labels)} labels, but the classifier has {n_classes} "
            "classes; restore the run.json saved with the model"
        )
    return labels


def load_classifier(model_dir: Path, quantize: str | None = None):
    """(model, tokenizer, labels) of a classifier's model directory; a clear error otherwise.

    ``quantize`` ("int8") quantizes its linear layers (``aiayn.model.quantize``)."""
    directory = ModelDir.open(model_dir)
    check_classifier(directory.config, directory.path)
    labels = classifier_labels(directory, directory.config.n_classes)
    model, tokenizer = directory.load(quantize=quantize)
    return model, tokenizer, labels


@torch.no_grad()
def classify_texts(
    model, tokenizer, texts: list[str], batch_size: int = 64, where: str = ""
) -> Tensor:
    """Class probabilities (N, C) of ``texts`` under one classifier, batch by batch.

    Texts longer than the model's ``max_len`` are truncated, with a warning naming ``where``;
    an empty (or whitespace-only) text is refused (``UserError``): it has no class.
    """
    refuse_blank(texts, "classify")
    ids = encode_texts(tokenizer, texts, model.config.max_len, where or "classify")
    device = next(model.parameters()).device
    return torch.cat(
        [  # (B, C), float32 on the CPU whatever the model's device and dtype
            model.classify(pad(ids[i : i + batch_size]).to(device)).float().softmax(-1).cpu()
            for i in range(0, len(ids), batch_size)
        ]
        or [torch.empty(0, model.config.n_classes)]
    )


@torch.no_grad()
def class_probabilities(
    model_dirs: list[Path], texts: list[str], batch_size: int = 64, quantize: str | None = None
) -> tuple[list[str], Tensor]:
    """(labels, probabilities (N, C)) for ``texts``, averaged over the models of ``model_dirs``.

    Each model reads the texts with its own tokenizer; texts longer than a model's
    ``max_len`` are truncated, with a warning. The models must share their labels.
    """
    if not model_dirs:
        raise ValueError("no model directory given")
    refuse_blank(texts, "classify")  # before loading any model
    members = []
    for model_dir in model_dirs:
        model, tokenizer, labels = load_classifier(model_dir, quantize)
        members.append((str(model_dir), model, tokenizer, labels))
    return average_probabilities(members, texts, batch_size)


def average_probabilities(members: list[tuple], texts: list[str], batch_size: int = 64):
    """(labels, probabilities (N, C)) of ``texts`` averaged over ``members``, each
    (name, model, tokenizer, labels); their labels must agree."""
    labels, total = None, None
    for name, model, tokenizer, these in members:
        if labels is not None and these != labels:
            raise UserError(
                f"{name} has labels {these}, but {members[0][0]} has {labels}: "
                "an ensemble needs the same labels in the same order"
            )
        labels = these
        warn_unknown_characters(tokenizer, texts, name)
        probs = classify_texts(model, tokenizer, texts, batch_size, name)  # (N, C)
        total = probs if total is None else total + probs
    return labels, total / len(members)
