"""Translate many sentences: length-sorted batches, input order kept."""

from __future__ import annotations

import time
import warnings

import torch

from aiayn.data.batching import pad
from aiayn.data.tokenizer import EOS, PAD, Tokenizer
from aiayn.infer.beam import Hypothesis, beam_decode
from aiayn.infer.greedy import greedy_decode
from aiayn.infer.sampling import Sampling, row_generators, sample_decode


def search(
    model,
    src: torch.Tensor,
    beam: int = 1,
    lenpen: float = 0.6,
    max_len_offset: int = 50,
    nbest: int = 1,
    early_stop: bool = False,
    sampling: Sampling | None = None,
    indices: list[int] | None = None,
) -> list[list[Hypothesis]]:
    """Greedy search (beam 1), beam search (§6.1) or, with ``sampling``, ``nbest`` samples
    (Phuong & Hutter 2022, Algorithm 15) over sources (B, S): n-best lists per sentence.

    ``indices`` (B,) identify the sentences for sampling: sentence i's samples come from
    generators seeded by (``sampling.seed``, i, sample number); default 0 .. B-1.

    ``model`` may also be a decoding engine (an object with a ``search`` method of this
    signature, e.g. ``aiayn.interop.ctranslate2.CTranslate2Engine``), which then decodes.
    """
    if not isinstance(model, torch.nn.Module):
        return model.search(src, beam, lenpen, max_len_offset, nbest, early_stop, sampling, indices)
    if sampling is not None:
        if beam != 1:
            raise ValueError(f"sampling draws one token at a time: beam must be 1, got {beam}")
        indices = list(range(src.size(0))) if indices is None else indices
        generators = row_generators(sampling.seed, indices, nbest)
        s = sampling
        return sample_decode(
            model, src, s.temperature, s.top_k or 0, s.top_p, generators, nbest, max_len_offset
        )
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
    sampling: Sampling | None = None,
    first_index: int = 0,
) -> list[list[tuple[str, float]]]:
    """n-best (translation, score) lists for ``texts``, in input order.

    Sentences are sorted by length and batched up to ``max_tokens`` source tokens times the
    beam (or ``nbest``); ``stats`` (if given) receives sentences/s, generated tokens/s and
    "truncated", the indices of the texts longer than the model's ``max_len`` (only their first
    ``max_len - 1`` tokens are read; without ``stats`` that is a warning).
    With ``sampling`` (beam 1), ``nbest`` samples per sentence in the order drawn, each
    scored by its log-probability under the model; ``texts[k]`` counts as sentence
    ``first_index + k`` for the seeds, so a sentence samples the same whatever else is
    translated with it (pass the running line number when translating a stream in parts).
    """
    if nbest < 1:
        raise ValueError(f"nbest must be >= 1, got {nbest}")
    if sampling is not None and beam != 1:
        raise ValueError(f"sampling draws one token at a time: beam must be 1, got {beam}")
    ids = tokenizer.encode(texts)
    limit = model.config.max_len - 1
    truncated = [i for i, x in enumerate(ids) if len(x) > limit]
    if truncated and stats is None:
        warnings.warn(
            f"{len(truncated)} of {len(ids)} texts are longer than the model's max_len "
            f"({model.config.max_len} tokens); only their first {limit} tokens are translated",
            stacklevel=2,
        )
    ids = [x[:limit] + [EOS] for x in ids]
    out: list = [None] * len(ids)
    budget = max(max_tokens // (nbest if sampling is not None else beam), 1)
    start, produced = time.perf_counter(), 0
    for chunk in length_batches([len(x) for x in ids], budget):
        src = pad([ids[k] for k in chunk])
        indices = [first_index + k for k in chunk]
        hyps = search(
            model, src, beam, lenpen, max_len_offset, nbest, early_stop, sampling, indices
        )
        for k, n_best in zip(chunk, hyps, strict=True):
            if sampling is not None:  # every sample is output
                produced += sum(len(h.tokens) for h in n_best)
            else:  # beam search: the best hypothesis's tokens
                produced += len(n_best[0].tokens) if n_best else 0
            texts_out = tokenizer.decode([h.tokens for h in n_best])
            out[k] = [(t, h.score) for t, h in zip(texts_out, n_best, strict=True)]
    if stats is not None:
        seconds = max(time.perf_counter() - start, 1e-9)
        stats.update(
            sentences_per_s=len(texts) / seconds,
            tokens_per_s=produced / seconds,
            truncated=truncated,
        )
    return out


def translate_best(model, tokenizer: Tokenizer, texts: list[str], **kwargs) -> list[str]:
    """The best translation of each text."""
    return [
        n_best[0][0] if n_best else "" for n_best in translate(model, tokenizer, texts, **kwargs)
    ]
