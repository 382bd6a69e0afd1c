"""Text classification with one encoder-only classifier or an ensemble of them."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from aiayn.data.batching import pad
from aiayn.data.labelled import encode_texts
from aiayn.data.tokenizer import load_tokenizer
from aiayn.modeldir import load_model_dir


def load_classifier(model_dir: Path, quantize: str | None = None):
    """(model, tokenizer, labels) of a classifier's model directory; a clear error otherwise.

    ``quantize`` ("int8") quantizes its linear layers (``aiayn.infer.quantize``)."""
    model_dir = Path(model_dir)
    model = load_model_dir(model_dir, quantize=quantize)
    run_file = model_dir / "run.json"
    labels = json.loads(run_file.read_text()).get("labels") if run_file.is_file() else None
    if model.config.family != "encoder-only" or not model.config.n_classes or not labels:
        raise ValueError(f"{model_dir} holds no text classifier (no classifier head or labels)")
    return model, load_tokenizer(model_dir), labels


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
    labels, total = None, None
    for model_dir in model_dirs:
        model, tokenizer, these = load_classifier(model_dir, quantize)
        if labels is not None and these != labels:
            raise ValueError(
                f"{model_dir} has labels {these}, but {model_dirs[0]} has {labels}: "
                "an ensemble needs the same labels in the same order"
            )
        labels = these
        ids = encode_texts(tokenizer, texts, model.config.max_len, str(model_dir))
        probs = torch.cat(
            [
                model.classify(pad(ids[i : i + batch_size])).softmax(-1)  # (B, C)
                for i in range(0, len(ids), batch_size)
            ]
            or [torch.empty(0, len(labels))]
        )
        total = probs if total is None else total + probs
    return labels, total / len(model_dirs)
