"""Batched beam search with the GNMT length penalty (Vaswani et al. 2017 §6.1; Wu et al. 2016).

Written as a pure function over a step function and a reorder function, so the search can
be tested against a scripted decoder with hand-set probabilities.

Conventions: a hypothesis's length |Y| counts its generated tokens including the final eos;
its score is log P(Y) / lp(Y) with lp(Y) = ((5 + |Y|) / 6) ** alpha. An eos candidate finishes
a hypothesis only when it ranks among the top K candidates of its sentence (as in fairseq).
A sentence is done when it has ``nbest`` finished hypotheses and no live one can still beat
them: a live log-probability only falls, so its best reachable score is
logP / lp(max_len) (for alpha >= 0). At max_len the live hypotheses are finished as they are.

The search is split by concern: what it keeps between steps and the loop that drives it
(``aiayn.infer.beam_state``: the finished hypotheses, the live ones' tokens on the host,
``run_search``) are shared with the constrained search; a selection picks each step's
survivors (``TopK`` here; ``aiayn.infer.constrained`` shares the beam out by constraints
met); ``decoder_search`` wires an encoder-decoder's step and reorder functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from aiayn.config import BOS, EOS, PAD
from aiayn.infer.beam_state import (  # noqa: F401 - beam's names too
    Hypothesis,
    Picks,
    ReorderFn,
    SearchShape,
    StepFn,
    _finalize,
    length_penalty,
    run_search,
    to_host,
)
from aiayn.infer.mode import decoding


class TopK:
    """The plain search's selection: the best K candidates that are not eos live on; eos among
    the best K candidates finishes a hypothesis. All on the device but one table read back."""

    def __init__(self, shape: SearchShape, b: int):
        self.shape = shape
        self.first_row = torch.arange(b, device=shape.device)[:, None] * shape.k  # (B, 1)

    def __call__(
        self, logp: Tensor, log_probs: Tensor, limit: Tensor, spans: np.ndarray, length: int
    ) -> Picks:
        s = self.shape
        k, n, v = s.k, log_probs.size(0), logp.size(-1)
        cand = log_probs[:, :, None] + logp.view(n, k, v)  # (N, K, V)
        top_scores, top_index = cand.view(n, k * v).topk(2 * k, dim=1)  # (N, 2K)
        is_eos = top_index % v == s.eos_id  # (N, 2K)
        # the best K candidates that are not eos live on
        live_scores = top_scores.masked_fill(is_eos, float("-inf"))
        log_probs, pick = live_scores.topk(k, dim=1)  # (N, K)
        chosen = top_index.gather(1, pick)  # (N, K) into (K, V)
        parents, last = self.first_row[:n] + chosen // v, chosen % v  # (N, K) flat rows, tokens
        columns = [log_probs.double(), top_scores[:, :k], top_index[:, :k], chosen]
        if s.alpha >= 0:  # a live log-probability only falls: its best is logP / lp(limit)
            best_live = log_probs.max(1).values.double()  # (N,)
            horizon = s.horizon(limit, length)
            reachable = best_live / length_penalty(horizon.double() + s.p, s.alpha)  # (N,)
            columns.append(reachable[:, None])
        host = to_host(torch.cat(columns, 1))  # (N, 4K [+ 1]) float64: the one transfer
        top_host = host[:, k : 2 * k]  # (N, K) scores
        top_at = host[:, 2 * k : 3 * k].astype(np.int64)  # (N, K) into (K, V)
        chosen_at = host[:, 3 * k : 4 * k].astype(np.int64)  # (N, K)
        # eos among the top K candidates finishes a hypothesis
        eos_rank = (top_at % v == s.eos_id) & np.isfinite(top_host)  # (N, K)
        ends = [
            (row, top_at[row, j] // v, float(top_host[row, j]), ())
            for row, j in zip(*np.nonzero(eos_rank), strict=True)
        ]
        return Picks(
            log_probs, parents, last, host[:, :k], chosen_at // v, chosen_at % v, ends,
            host[:, 4 * k] if s.alpha >= 0 else None,
        )  # fmt: skip

    def keep(self, rows: np.ndarray) -> None:
        """Only the sentences ``rows`` search on (nothing to follow: no state per row)."""

    def unmet(self, row: int, j: int) -> tuple[int, ...]:
        return ()


@decoding
def beam_search(
    step: StepFn,
    reorder: ReorderFn,
    batch_size: int,
    beam: int,
    max_len: Tensor,
    alpha: float = 0.6,
    nbest: int = 1,
    device: torch.device | str = "cpu",
    early_stop: bool = False,
    bos_id: int = BOS,
    eos_id: int = EOS,
    prefix: list[list[int]] | None = None,
    prefix_log_prob: Tensor | None = None,
    on_tokens: Callable[[np.ndarray], None] | None = None,
) -> list[list[Hypothesis]]:
    """n-best hypotheses per sentence, best first.

    By default a sentence stops only when no live hypothesis can still win (exact, and slow:
    with alpha > 0 that is often at ``max_len``). ``early_stop`` uses the common heuristic
    (Hugging Face's default): stop once the best live hypothesis, finished now, would not
    beat the n-th best finished one; a longer, better hypothesis may then be missed.

    ``step`` maps each live hypothesis's last token (N*K, 1) to next-token log-probs
    (N*K, V), reading whatever it keeps (e.g. a KV cache) in beam order; ``reorder(index)``
    selects and re-orders the rows of that state after each step. Finished sentences leave
    the batch (N shrinks from B), so they cost no more decoder steps. ``max_len`` (B,) caps
    each sentence's length. Hypotheses start from ``bos_id`` and finish with ``eos_id``.

    ``prefix``: per sentence, the target tokens (of one length P for all) that every
    hypothesis begins with, already read by ``step``'s state, and ``prefix_log_prob`` (B,)
    their log-probability: hypotheses hold the prefix, are scored over the whole target, and
    ``max_len`` counts the prefix.

    Each step moves one small table from the device to the host (the candidates, the picks,
    each sentence's best reachable score), where the finished hypotheses and the live ones'
    tokens are kept; ``on_tokens``, if given, is shown the tokens each step is about to read
    (N*K,) from there, e.g. for a decoder state to skip checking them for padding.
    """
    shape = SearchShape(beam, alpha, early_stop, len(prefix[0]) if prefix else 0, eos_id, device)
    return run_search(
        step, reorder, TopK(shape, batch_size), shape, batch_size, max_len, nbest, bos_id,
        prefix, prefix_log_prob, on_tokens,
    )  # fmt: skip


@dataclass
class DecoderSearch:
    """An encoder-decoder wired for a beam search: its step and reorder functions, each
    sentence's length limit, and the prefix the hypotheses begin with (if any)."""

    step: StepFn
    reorder: ReorderFn
    max_len: Tensor  # (B,)
    prefix: list[list[int]] | None
    prefix_log_prob: Tensor | None
    on_tokens: Callable[[np.ndarray], None]


def decoder_search(
    model, src: Tensor, beam: int, max_len_offset: int, prefix: Tensor | None
) -> DecoderSearch:
    """Encode sources (B, S) once and wire the decoder for ``beam`` beams a sentence: the
    beams share their sentence's memory, mask and cross-attention keys and values (computed
    once per sentence, never copied per beam); the decoder's self-attention KV cache follows
    the beams. ``prefix`` (B, P) of real target tokens begins every hypothesis: bos + prefix
    is read in one teacher-forced pass (per beam, filling the cache), and the search starts
    from its end."""
    from aiayn.infer.greedy import prefix_log_prob

    model.eval()
    config = model.config
    memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    state = model.new_state(src_mask, beams=beam)
    max_len = config.clamp_length((src != config.pad_id).sum(1) + max_len_offset)  # (B,)
    primed: dict = {}
    if prefix is not None and prefix.size(1):
        first = torch.cat([torch.full_like(prefix[:, :1], config.bos_id), prefix], 1)
        logits = model.decode(first.repeat_interleave(beam, 0), memory, state=state)
        primed["log_prob"] = prefix_log_prob(logits[::beam], prefix)  # (B,)
        primed["next"] = torch.log_softmax(logits[:, -1].float(), dim=-1)  # (B*K, V)

    def step(tokens: Tensor) -> Tensor:
        if "next" in primed:  # the first step, after the prefix's pass
            return primed.pop("next")
        logits = model.decode(tokens, memory, state=state)[:, -1]  # (B*K, V); memory (B, S, D)
        return torch.log_softmax(logits.float(), dim=-1)

    def reorder(index: Tensor) -> None:  # a row's parent is a beam of the same sentence
        state.reorder(index, same_sources=True)

    prefixes = prefix.tolist() if "log_prob" in primed else None
    return DecoderSearch(
        step, reorder, max_len, prefixes, primed.get("log_prob"), _vouch(state, config.pad_id)
    )


@decoding
def beam_decode(
    model,
    src: Tensor,
    beam: int = 4,
    alpha: float = 0.6,
    max_len_offset: int = 50,
    nbest: int = 1,
    early_stop: bool = False,
    prefix: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """Beam search over an encoder-decoder for sources (B, S): n-best lists per sentence
    (``decoder_search``: how the model is read)."""
    config = model.config
    d = decoder_search(model, src, beam, max_len_offset, prefix)
    return beam_search(
        d.step, d.reorder, src.size(0), beam, d.max_len, alpha, nbest, src.device, early_stop,
        config.bos_id, config.eos_id, d.prefix, d.prefix_log_prob, on_tokens=d.on_tokens,
    )  # fmt: skip


@decoding
def beam_continue(
    model,
    prompt: Tensor,
    beam: int = 4,
    alpha: float = 0.6,
    max_new_tokens: int = 50,
    nbest: int = 1,
    early_stop: bool = False,
) -> list[list[Hypothesis]]:
    """Beam search over a decoder-only model continuing prompts (B, T) of real tokens.

    The first step runs the whole prompt (repeated per beam) through the model, filling the
    KV cache; each hypothesis holds the new tokens only.
    """
    config = model.config
    if (prompt == config.pad_id).any():
        raise ValueError("beam_continue needs prompts of real tokens (no padding)")
    model.eval()
    b, k = prompt.size(0), beam
    state = model.new_state()
    pending = [prompt.repeat_interleave(k, dim=0)]  # (B*K, T), fed at the first step
    limit = config.clamp_length(prompt.size(1) + max_new_tokens) - prompt.size(1)
    if limit < 1:
        raise ValueError(f"no room for new tokens after a prompt of {prompt.size(1)}")

    def step(tokens: Tensor) -> Tensor:
        x = pending.pop() if pending else tokens  # (B*K, T) or (B*K, 1)
        logits = model(x, state=state)[:, -1]  # (B*K, V)
        return torch.log_softmax(logits.float(), dim=-1)

    max_len = torch.full((b,), limit, dtype=torch.long, device=prompt.device)
    return beam_search(
        step, state.reorder, b, k, max_len, alpha, nbest, prompt.device, early_stop,
        config.bos_id, config.eos_id, on_tokens=_vouch(state, config.pad_id),
    )  # fmt: skip


def _vouch(state, pad_id: int) -> Callable[[np.ndarray], None]:
    """Tell ``state`` whether the tokens a step reads are all real, from the search's host
    copy of them, so that it need not look on the device (``DecoderState.tokens_real``)."""

    def on_tokens(tokens: np.ndarray) -> None:
        state.tokens_real = not (tokens == pad_id).any()

    return on_tokens


def best_tokens(hyps: list[list[Hypothesis]]) -> Tensor:
    """The best hypothesis of each sentence as a padded (B, L) tensor."""
    rows = [h[0].tokens if h else [EOS] for h in hyps]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long)
