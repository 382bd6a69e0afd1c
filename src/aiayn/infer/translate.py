"""Translate many sentences: length-sorted batches, input order kept."""

from __future__ import annotations

import time

import torch

from aiayn.data.batching import pad
from aiayn.data.tokenizer import EOS, PAD, Tokenizer
from aiayn.infer.beam import Hypothesis, beam_decode
from aiayn.infer.greedy import greedy_decode


def search(
    model,
    src: torch.Tensor,
    beam: int = 1,
    lenpen: float = 0.6,
    max_len_offset: int = 50,
    nbest: int = 1,
    early_stop: bool = False,
) -> list[list[Hypothesis]]:
    """Greedy search (beam 1) or beam search (§6.1) over sources (B, S): n-best per sentence."""
    if beam == 1 and nbest == 1:
        out = greedy_decode(model, src, max_len_offset)  # (B, L)
        rows = []
        for row in out.tolist():
            tokens = [t for t in row if t != PAD]
            rows.append([Hypothesis(tokens, float("nan"), float("nan"))])
        return rows
    return beam_decode(model, src, beam, lenpen, max_len_offset, nbest, early_stop)


def length_batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` sorted by length and cut into batches by tokens (throughput
    mode): each batch takes sentences while its padded size (longest x count) stays within
    ``max_tokens``, so short sentences travel in large batches and long ones in small."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, i = [], 0
    while i < len(order):
        j = i + 1
        while j < len(order) and lengths[order[j]] * (j - i + 1) <= max_tokens:
            j += 1
        batches.append(order[i:j])
        i = j
    return batches


def translate(
    model,
    tokenizer: Tokenizer,
    texts: list[str],
    beam: int = 1,
    lenpen: float = 0.6,
    max_len_offset: int = 50,
    nbest: int = 1,
    early_stop: bool = False,
    max_tokens: int = 4096,
    stats: dict | None = None,
) -> list[list[tuple[str, float]]]:
    """n-best (translation, score) lists for ``texts``, in input order.

    Sentences are sorted by length and batched up to ``max_tokens`` source tokens times the
    beam; ``stats`` (if given) receives sentences/s and generated tokens/s.
    """
    ids = tokenizer.encode(texts)
    ids = [x[: model.config.max_len - 1] + [EOS] for x in ids]
    out: list = [None] * len(ids)
    budget = max(max_tokens // beam, 1)
    start, produced = time.perf_counter(), 0
    for chunk in length_batches([len(x) for x in ids], budget):
        src = pad([ids[k] for k in chunk])
        hyps = search(model, src, beam, lenpen, max_len_offset, nbest, early_stop)
        for k, n_best in zip(chunk, hyps, strict=True):
            produced += len(n_best[0].tokens) if n_best else 0
            texts_out = tokenizer.decode([h.tokens for h in n_best])
            out[k] = [(t, h.score) for t, h in zip(texts_out, n_best, strict=True)]
    if stats is not None:
        seconds = max(time.perf_counter() - start, 1e-9)
        stats.update(sentences_per_s=len(texts) / seconds, tokens_per_s=produced / seconds)
    return out


def translate_best(model, tokenizer: Tokenizer, texts: list[str], **kwargs) -> list[str]:
    """The best translation of each text."""
    return [
        n_best[0][0] if n_best else "" for n_best in translate(model, tokenizer, texts, **kwargs)
    ]
