"""Translate many sentences: length-sorted batches, input order kept."""

from __future__ import annotations

import functools
import math
import re
import time
import warnings

import torch

from aiayn.data.batching import pad
from aiayn.data.labelled import is_blank
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.infer.beam import Hypothesis, beam_decode
from aiayn.infer.constrained import constrained_decode
from aiayn.infer.greedy import greedy_search
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
    scores: bool = True,
    prefix: torch.Tensor | None = None,
    constraints: list[list[list[int]]] | None = None,
    inword: frozenset[int] = frozenset(),
    banned: list[frozenset[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Greedy search (beam 1), beam search (§6.1) or, with ``sampling``, ``nbest`` samples
    (Phuong & Hutter 2022, Algorithm 15) over sources (B, S): n-best lists per sentence.
    ``prefix`` (B, P): target tokens every hypothesis begins with (one length for the batch),
    read in one teacher-forced pass; scores are over the whole target.

    ``constraints``: per sentence, token sequences its outputs must hold
    (``aiayn.infer.constrained``); if any sentence has one, the batch decodes with
    constrained beam search, greedy and sampling requests included, with
    ``constrained_beam(beam, nbest)`` beams; a constraint is a whole word, not followed by
    a token of ``inword`` (``inword_tokens``); ``banned`` (per sentence): tokens it may
    write only as part of one of its constraints.

    A greedy hypothesis's score is its log-probability (NaN with ``scores`` False: a caller
    that keeps only the tokens spares every step a sum over the vocabulary); a beam
    hypothesis's is log P / lp (§6.1); a sample's is its log-probability under the model.
    ``indices`` (B,) identify the sentences for sampling: sentence i's samples come from
    generators seeded by (``sampling.seed``, i, sample number); default 0 .. B-1.

    ``model`` may also be a decoding engine (an object with a ``search`` method of this
    signature, e.g. ``aiayn.interop.ctranslate2.CTranslate2Engine``), which then decodes.
    """
    if prefix is not None and not prefix.size(1):
        prefix = None
    if constraints is not None and any(any(len(c) for c in cs) for cs in constraints):
        if not isinstance(model, torch.nn.Module):
            raise UserError(
                f"the {getattr(model, 'name', 'given')} engine cannot hold constraints (a "
                "glossary's terms, kept spans): decode them with the torch engine"
            )
        k = constrained_beam(beam, nbest)
        return constrained_decode(
            model, src, constraints, k, lenpen, max_len_offset, nbest, early_stop, prefix, inword,
            banned,
        )  # fmt: skip
    if not isinstance(model, torch.nn.Module):
        options = {"scores": scores} if prefix is None else {"scores": scores, "prefix": prefix}
        return model.search(
            src, beam, lenpen, max_len_offset, nbest, early_stop, sampling, indices, **options
        )
    if sampling is not None:
        if beam != 1:
            raise ValueError(f"sampling draws one token at a time: beam must be 1, got {beam}")
        indices = list(range(src.size(0))) if indices is None else indices
        s, generators = sampling, None
        if s.seed is not None:
            generators = row_generators(s.seed, indices, nbest)
        return sample_decode(
            model, src, s.temperature, s.top_k, s.top_p, generators, nbest, max_len_offset,
            prefix,
        )  # fmt: skip
    if beam == 1 and nbest == 1:
        out, log_prob = greedy_search(model, src, max_len_offset, scores=scores, prefix=prefix)
        pad_id = model.config.pad_id
        lps = log_prob.tolist() if log_prob is not None else [math.nan] * len(out)
        return [
            [Hypothesis([t for t in row if t != pad_id], lp, lp)]
            for row, lp in zip(out.tolist(), lps, strict=True)
        ]
    return beam_decode(model, src, beam, lenpen, max_len_offset, nbest, early_stop, prefix)


CONSTRAINED_BEAM = 4  # the fewest beams constrained search decodes with


def constrained_beam(beam: int, nbest: int) -> int:
    """The beams a request with constraints decodes with: its own, but at least
    ``CONSTRAINED_BEAM`` (greedy search and sampling have one beam: a constraint's tokens and
    the model's best need room side by side) and ``nbest``."""
    return max(beam, nbest, CONSTRAINED_BEAM)


@functools.lru_cache(maxsize=8)
def inword_tokens(tokenizer) -> frozenset[int]:
    """The tokens that go on with the word before them: pieces that do not begin a word
    (no "▁") and begin with a letter or digit ("ed", "s"; a character model's letters).
    Made once a tokenizer."""
    out = []
    for i in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(i)
        if piece[:1].isalnum() and piece[0] != "\u0120":  # "Ġ": a byte-level BPE word start
            out.append(i)
    return frozenset(out)


SIGILS = "%{}$<>"  # the characters placeholders are made of, never a word's
_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_SPECIAL = re.compile(r"^(?:</?[A-Za-z_]+>|\[[A-Z]+\])$")


@functools.lru_cache(maxsize=8)
def sigil_tokens(tokenizer) -> dict[str, frozenset[int]]:
    """For each of ``SIGILS``, the tokens whose text holds it (byte pieces "<0x25>" as the
    byte they stand for; special tokens "<s>", "<unk>" hold none). Made once a tokenizer."""
    out: dict[str, set[int]] = {c: set() for c in SIGILS}
    for i in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(i)
        byte = _BYTE.match(piece)
        if byte:
            piece = chr(int(byte.group(1), 16))
        elif _SPECIAL.match(piece):
            continue
        for c in SIGILS:
            if c in piece:
                out[c].add(i)
    return {c: frozenset(ids) for c, ids in out.items()}


def source_ids(model, tokenizer: Tokenizer, texts: list[str]) -> tuple[list[list[int]], list[int]]:
    """The encoder inputs of ``texts`` (cut to the model's ``max_len`` with eos, or as its
    config frames sources: ``ModelConfig.source_frame``) and the indices of the texts that
    were cut."""
    head, tail = model.config.source_frame
    ids = tokenizer.encode(texts)
    limit = model.config.max_len - len(head) - len(tail)
    truncated = [i for i, x in enumerate(ids) if len(x) > limit]
    return [head + x[:limit] + tail for x in ids], truncated


def length_batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` sorted by length and cut into batches by tokens (throughput
    mode): each batch takes sentences while its padded size (longest x count) stays within
    ``max_tokens``, so short sentences travel in large batches and long ones in small.

    Batches are cut from the longest sentences down (as CTranslate2 does), so that the
    remnant batch holds the shortest sentences, which decode in few steps: a remnant of long
    ones would run many steps on a nearly empty batch (1.025x on bench/decode_speed.py's
    sentences: ``bench/experiments/ab_decode.py --mode throughput``). Returned shortest first,
    each batch in length order.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)  # stable
    batches, i = [], 0
    while i < len(order):
        longest, j = lengths[order[i]], i + 1
        while j < len(order) and longest * (j - i + 1) <= max_tokens:
            j += 1
        batches.append(order[i:j][::-1])
        i = j
    return batches[::-1]


def translate_texts(
    model,
    tokenizer: Tokenizer,
    texts: list[str],
    beam: int = 1,
    lenpen: float = 0.6,
    max_len_offset: int = 50,
    nbest: int = 1,
    early_stop: bool = False,
    max_tokens: int = 4096,
    sampling: Sampling | None = None,
    first_index: int = 0,
    scores: bool = True,
    prefixes: list[str] | None = None,
    constraints: list[list[list[int]]] | None = None,
    banned: list[frozenset[int]] | None = None,
) -> tuple[list[list[tuple[str, Hypothesis]]], list[int]]:
    """n-best (text, hypothesis) lists for ``texts`` in input order, and the indices of the
    texts longer than the model's ``max_len`` (only their first ``max_len - 1`` tokens are
    read).

    Sentences are sorted by length and batched up to ``max_tokens`` source tokens times the
    beam (or ``nbest``). With ``sampling`` (beam 1), ``nbest`` samples per sentence in the
    order drawn, each scored by its log-probability under the model; ``texts[k]`` counts as
    sentence ``first_index + k`` for the seeds, so a sentence samples the same whatever else
    is translated with it (pass the running line number when translating a stream in parts).
    ``scores`` False: greedy outputs are not scored (``search``). An empty text (or one of
    whitespace only) has nothing to translate: its translation is the empty text, with score 0
    (the log-probability of a certain outcome), the model unasked.

    ``prefixes`` (one per text; "" for none): target text each translation begins with
    (interactive translation, a fixed opening), cut into the target's tokens; sentences with
    prefixes of different lengths are searched in groups of one length.

    ``constraints`` (one list per text; [] for none): the token sequences each translation
    must hold (``search``); texts with constraints are searched apart from those without,
    which decode as they would alone. A blank text stays blank. ``banned`` (one set per
    text): tokens a translation with constraints may write only inside one of them (the
    pieces of a placeholder: no stray "%" beside the "%s" kept).
    """
    if nbest < 1:
        raise ValueError(f"nbest must be >= 1, got {nbest}")
    if sampling is not None and beam != 1:
        raise ValueError(f"sampling draws one token at a time: beam must be 1, got {beam}")
    ids, truncated = source_ids(model, tokenizer, texts)
    heads = prefix_ids(model, tokenizer, prefixes, len(texts))
    out: list = [
        [("", Hypothesis([], 0.0, 0.0))] if is_blank(t) and not head else None
        for t, head in zip(texts, heads, strict=True)
    ]
    todo = [k for k, done in enumerate(out) if done is None]
    budget = max(max_tokens // (nbest if sampling is not None else beam), 1)
    device = next(model.parameters()).device if isinstance(model, torch.nn.Module) else "cpu"
    if constraints is not None and len(constraints) != len(texts):
        raise UserError(f"{len(constraints)} constraint lists for {len(texts)} texts")
    held = constraints or [[] for _ in texts]
    bound = [any(len(c) for c in held[k]) for k in range(len(texts))]
    inword = inword_tokens(tokenizer) if any(bound) else frozenset()
    budgets = [budget, max(max_tokens // constrained_beam(beam, nbest), 1)]
    # one prefix length per search, and constrained texts apart: full batches of each
    by_prefix: dict[tuple[int, bool], list[int]] = {}
    for k in todo:
        by_prefix.setdefault((len(heads[k]), bound[k]), []).append(k)
    for (width, constrained), group in sorted(by_prefix.items()):
        for batch in length_batches([len(ids[k]) for k in group], budgets[constrained]):
            chunk = [group[j] for j in batch]
            src = pad([ids[k] for k in chunk], model.config.pad_id).to(device)
            indices = [first_index + k for k in chunk]
            prefix = torch.tensor([heads[k] for k in chunk], device=device) if width else None
            hyps = search(
                model, src, beam, lenpen, max_len_offset, nbest, early_stop, sampling, indices,
                scores, prefix, [held[k] for k in chunk] if bound[chunk[0]] else None, inword,
                [banned[k] for k in chunk] if banned is not None and bound[chunk[0]] else None,
            )  # fmt: skip
            # the batch's outputs detokenized together, then handed out in order
            texts_out = iter(tokenizer.decode([h.tokens for n_best in hyps for h in n_best]))
            for k, n_best in zip(chunk, hyps, strict=True):
                out[k] = [(next(texts_out), h) for h in n_best]
    return out, truncated


def prefix_ids(model, tokenizer: Tokenizer, prefixes: list[str] | None, n: int) -> list[list[int]]:
    """The target tokens of each text's prefix (none: empty lists), within the model's
    positions."""
    if prefixes is None:
        return [[] for _ in range(n)]
    if len(prefixes) != n:
        raise UserError(f"{len(prefixes)} prefixes for {n} texts: give one per text ('' for none)")
    heads = [tokenizer.encode_target([p])[0] if p.strip() else [] for p in prefixes]
    positions = model.config.max_positions
    for i, head in enumerate(heads):
        if positions is not None and len(head) + 1 >= positions:
            raise UserError(
                f"prefix {i + 1}: {len(head)} tokens; the model has {positions} target "
                "positions (bos included), so a prefix may have at most "
                f"{positions - 2}"
            )
    return heads


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
    scores: bool = True,
    prefixes: list[str] | None = None,
) -> list[list[tuple[str, float]]]:
    """n-best (translation, score) lists for ``texts``, in input order (``translate_texts``
    with the scores only; ``aiayn.load(...).translate`` gives typed results).

    ``stats`` (if given) receives sentences/s, generated tokens/s and "truncated", the
    indices of the texts longer than the model's ``max_len``; without ``stats`` those are a
    warning.
    """
    start = time.perf_counter()
    out, truncated = translate_texts(
        model, tokenizer, texts, beam, lenpen, max_len_offset, nbest, early_stop, max_tokens,
        sampling, first_index, scores, prefixes,
    )  # fmt: skip
    if truncated and stats is None:
        warnings.warn(
            f"{len(truncated)} of {len(texts)} texts are longer than the model's max_len "
            f"({model.config.max_len} tokens); only their first {model.config.max_len - 1} "
            "tokens are translated",
            stacklevel=2,
        )
    if stats is not None:
        seconds = max(time.perf_counter() - start, 1e-9)
        produced = sum(produced_tokens([h for _, h in n_best], sampling) for n_best in out)
        stats.update(
            sentences_per_s=len(texts) / seconds,
            tokens_per_s=produced / seconds,
            truncated=truncated,
        )
    return [[(text, h.score) for text, h in n_best] for n_best in out]


def produced_tokens(n_best: list, sampling: Sampling | None) -> int:
    """Tokens a search generated for one sentence: every sample's, or the best hypothesis's."""
    if sampling is not None:
        return sum(len(h.tokens) for h in n_best)
    return len(n_best[0].tokens) if n_best else 0


def translate_best(model, tokenizer: Tokenizer, texts: list[str], **kwargs) -> list[str]:
    """The best translation of each text (greedy outputs unscored: only the text is kept)."""
    out = translate(model, tokenizer, texts, scores=False, **kwargs)
    return [n_best[0][0] if n_best else "" for n_best in out]
