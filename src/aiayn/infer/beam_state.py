"""What a beam search keeps between its steps, and the loop that drives it: shared by the
plain search (``aiayn.infer.beam``) and the constrained one (``aiayn.infer.constrained``),
which differ only in how a step's survivors are selected.

``_Finished`` keeps each sentence's finished hypotheses and its n-th best score, ``_Beams``
the live hypotheses' tokens on the host, ``Picks`` is what a selection returns for one step,
and ``run_search`` calls the step function, the selection and the reorder function in turn,
finishing hypotheses at eos and at the length limit and letting finished sentences leave the
batch (Vaswani et al. 2017 §6.1; the conventions are ``aiayn.infer.beam``'s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

StepFn = Callable[[Tensor], Tensor]  # last tokens (B*K, 1) -> log-probs (B*K, V)
ReorderFn = Callable[[Tensor], None]  # flat beam indices (B*K,) -> None


def length_penalty(length, alpha: float):
    """lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, eq. 14); of an int, a tensor or an
    array alike."""
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, ending with eos unless cut at max_len
    score: float  # log P / lp
    log_prob: float
    unmet: tuple[int, ...] = ()  # the constraints (their indices) it does not hold


def _finalize(
    hyps: list[Hypothesis], tokens: list[int], log_prob: float, alpha: float, unmet=()
) -> None:
    score = log_prob / length_penalty(len(tokens), alpha)
    hyps.append(Hypothesis(tokens, score, log_prob, tuple(unmet)))


class _Finished:
    """The finished hypotheses of each of B sentences, kept on the host, with each one's
    count and n-th best score (what decides when a sentence is done)."""

    def __init__(self, b: int, nbest: int, alpha: float, heads: list[list[int]] | None):
        self.nbest, self.alpha, self.heads = nbest, alpha, heads
        self.hyps: list[list[Hypothesis]] = [[] for _ in range(b)]
        self.nth_best = np.full(b, float("-inf"))  # (B,) float64
        self.count = np.zeros(b, dtype=np.int64)  # (B,)

    def add(self, i: int, tokens: list[int], log_prob: float, unmet=()) -> None:
        """Sentence ``i`` finishes a hypothesis of new ``tokens`` (after its prefix, if any)
        that leaves the constraints ``unmet`` unmet (only ever at the length limit)."""
        hyps = self.hyps[i]
        toks = self.heads[i] + tokens if self.heads else tokens
        _finalize(hyps, toks, log_prob, self.alpha, unmet)
        self.count[i] += 1
        if len(hyps) >= self.nbest:
            self.nth_best[i] = sorted(h.score for h in hyps)[-self.nbest]

    def best(self) -> list[list[Hypothesis]]:
        """Each sentence's n-best, those that meet every constraint first, by score."""
        return [sorted(h, key=lambda x: (len(x.unmet), -x.score))[: self.nbest] for h in self.hyps]


class _Beams:
    """The live hypotheses on the host: each row's sentence and (new-token) length limit, the
    tokens each hypothesis generated, and the tokens the next step reads."""

    def __init__(self, limits: list[int], k: int, bos_id: int):
        b = len(limits)
        self.ids, self.spans = np.arange(b), np.array(limits, dtype=np.int64)  # (N,), (N,)
        self.tokens = np.zeros((b, k, 0), dtype=np.int64)  # (N, K, L)
        self.read = np.full((b, k), bos_id, dtype=np.int64)  # (N, K) what the step reads

    def __len__(self) -> int:
        return len(self.ids)

    def grow(self, parent_at: np.ndarray, token_at: np.ndarray) -> None:
        """Each new hypothesis (N, K) is its parent beam's tokens plus one token."""
        rows = np.arange(len(self.ids))[:, None]
        self.tokens = np.concatenate([self.tokens[rows, parent_at], token_at[..., None]], 2)
        self.read = token_at

    def keep(self, rows: np.ndarray) -> None:
        self.ids, self.spans = self.ids[rows], self.spans[rows]
        self.tokens, self.read = self.tokens[rows], self.read[rows]


@dataclass
class Picks:
    """One step's survivors: the K live hypotheses of each of N sentences, on the device (what
    the next step and the reorder read) and on the host (what the bookkeeping reads)."""

    log_probs: Tensor  # (N, K) live log-probabilities (-inf: no hypothesis)
    parents: Tensor  # (N, K) flat rows (sentence * K + beam) of their parents
    last: Tensor  # (N, K) their last tokens
    live: np.ndarray  # (N, K) float64 = log_probs
    parent_at: np.ndarray  # (N, K) each one's parent beam in its sentence
    token_at: np.ndarray  # (N, K) = last
    ends: list[tuple[int, int, float, tuple[int, ...]]]  # (row, parent beam, log P, unmet): eos
    reachable: np.ndarray | None  # (N,) the best score a live one can still reach (alpha >= 0)


@dataclass(frozen=True)
class SearchShape:
    """What a selection needs to know of the search: beam, penalty and stopping rule."""

    k: int
    alpha: float
    early_stop: bool
    p: int  # prefix length
    eos_id: int
    device: torch.device | str

    def horizon(self, limit, length: int):
        """The length a live hypothesis is judged at: its limit (the exact bound) or, with
        ``early_stop``, its length if it finished now."""
        if self.early_stop:
            return limit * 0 + length + 1
        return limit


def run_search(
    step: StepFn,
    reorder: ReorderFn,
    select,
    shape: SearchShape,
    b: int,
    max_len: Tensor,
    nbest: int,
    bos_id: int,
    prefix: list[list[int]] | None,
    prefix_log_prob: Tensor | None,
    on_tokens: Callable[[np.ndarray], None] | None,
) -> list[list[Hypothesis]]:
    """The beam search loop (``beam_search``'s arguments) over a selection ``select``: called
    with a step's log-probs (N*K, V), the live log-probs (N, K), the limits (N,) on the device
    and on the host, and the length, it returns the ``Picks``; ``select.keep(rows)`` follows the sentences that search
    on, ``select.unmet(row, beam)`` names the constraints a live hypothesis does not hold."""
    k, p, device = shape.k, shape.p, shape.device
    if nbest > k:
        raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({k})")
    limit = torch.as_tensor(max_len, device=device).expand(b).clone()  # (N,)
    limit = (limit - p).clamp(min=1)  # new tokens: the prefix counts in max_len
    log_probs = torch.full((b, k), float("-inf"), device=device)  # (N, K) live hypotheses
    log_probs[:, 0] = 0.0  # all beams start identical: expand only the first
    if prefix_log_prob is not None:
        log_probs[:, 0] = prefix_log_prob.to(log_probs.dtype)
    last = torch.full((b, k), bos_id, dtype=torch.long, device=device)  # (N, K) tokens read
    beams = _Beams(limit.tolist(), k, bos_id)  # on the host
    finished = _Finished(b, nbest, shape.alpha, prefix if p else None)
    length = 0
    while len(beams):
        length += 1
        n = len(beams)
        if on_tokens is not None:
            on_tokens(beams.read.reshape(-1))
        logp = step(last.view(n * k, 1))  # (N*K, V)
        picks = select(logp, log_probs, limit, beams.spans, length)
        for row, j, log_prob, unmet in picks.ends:  # eos candidates that finish
            toks = beams.tokens[row, j].tolist()
            finished.add(beams.ids[row], toks + [shape.eos_id], log_prob, unmet)
        beams.grow(picks.parent_at, picks.token_at)
        parents, last, log_probs = picks.parents, picks.last, picks.log_probs

        # sentences at their length limit finish their live hypotheses as they are
        at_limit = length >= beams.spans  # (N,)
        for row in np.flatnonzero(at_limit):
            for j in np.flatnonzero(np.isfinite(picks.live[row])):
                finished.add(
                    beams.ids[row], beams.tokens[row, j].tolist(), float(picks.live[row, j]),
                    select.unmet(row, j),
                )  # fmt: skip

        # a sentence is done when no live hypothesis can beat its n-th best finished one
        if picks.reachable is not None:
            done = at_limit | (picks.reachable <= finished.nth_best[beams.ids])
        else:  # the bound needs alpha >= 0; without it, stop at K finished
            done = at_limit | (finished.count[beams.ids] >= k)
        if done.all():
            break
        if done.any():  # finished sentences leave the batch
            keep = np.flatnonzero(~done)  # (N',)
            index = torch.from_numpy(keep).to(device, non_blocking=True)
            parents, last, log_probs, limit = (
                x.index_select(0, index) for x in (parents, last, log_probs, limit)
            )
            beams.keep(keep)
            select.keep(keep)
        reorder(parents.view(-1))  # follow the surviving beams
    return finished.best()


def to_host(packed: Tensor) -> np.ndarray:
    """A step's table (N, C) on the host: beam search's one transfer (a host sync) per step."""
    return packed.cpu().numpy()
