"""Batched beam search with the GNMT length penalty (Vaswani et al. 2017 §6.1; Wu et al. 2016).

Written as a pure function over a step function and a reorder function, so the search can
be tested against a scripted decoder with hand-set probabilities.

Conventions: a hypothesis's length |Y| counts its generated tokens including the final eos;
its score is log P(Y) / lp(Y) with lp(Y) = ((5 + |Y|) / 6) ** alpha. An eos candidate finishes
a hypothesis only when it ranks among the top K candidates of its sentence (as in fairseq).
A sentence is done when it has ``nbest`` finished hypotheses and no live one can still beat
them: a live log-probability only falls, so its best reachable score is
logP / lp(max_len) (for alpha >= 0). At max_len the live hypotheses are finished as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from aiayn.config import BOS, EOS, PAD
from aiayn.infer.mode import decoding

StepFn = Callable[[Tensor], Tensor]  # last tokens (B*K, 1) -> log-probs (B*K, V)
ReorderFn = Callable[[Tensor], None]  # flat beam indices (B*K,) -> None


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, ending with eos unless cut at max_len
    score: float  # log P / lp
    log_prob: float


def _finalize(hyps: list[Hypothesis], tokens: list[int], log_prob: float, alpha: float) -> None:
    score = log_prob / length_penalty(len(tokens), alpha)
    hyps.append(Hypothesis(tokens, score, log_prob))


class _Finished:
    """The finished hypotheses of each of B sentences, kept on the host, with each one's
    count and n-th best score (what decides when a sentence is done)."""

    def __init__(self, b: int, nbest: int, alpha: float, heads: list[list[int]] | None):
        self.nbest, self.alpha, self.heads = nbest, alpha, heads
        self.hyps: list[list[Hypothesis]] = [[] for _ in range(b)]
        self.nth_best = np.full(b, float("-inf"))  # (B,) float64
        self.count = np.zeros(b, dtype=np.int64)  # (B,)

    def add(self, i: int, tokens: list[int], log_prob: float) -> None:
        """Sentence ``i`` finishes a hypothesis of new ``tokens`` (after its prefix, if any)."""
        hyps = self.hyps[i]
        _finalize(hyps, self.heads[i] + tokens if self.heads else tokens, log_prob, self.alpha)
        self.count[i] += 1
        if len(hyps) >= self.nbest:
            self.nth_best[i] = sorted(h.score for h in hyps)[-self.nbest]

    def best(self) -> list[list[Hypothesis]]:
        return [sorted(h, key=lambda x: -x.score)[: self.nbest] for h in self.hyps]


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
    b, k = batch_size, beam
    p = len(prefix[0]) if prefix else 0
    if nbest > k:
        raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({k})")
    limit = torch.as_tensor(max_len, device=device).expand(b).clone()  # (N,)
    limit = (limit - p).clamp(min=1)  # new tokens: the prefix counts in max_len
    log_probs = torch.full((b, k), float("-inf"), device=device)  # (N, K) live hypotheses
    log_probs[:, 0] = 0.0  # all beams start identical: expand only the first
    if prefix_log_prob is not None:
        log_probs[:, 0] = prefix_log_prob.to(log_probs.dtype)
    last = torch.full((b, k), bos_id, dtype=torch.long, device=device)  # (N, K) tokens read
    first_row = torch.arange(b, device=device)[:, None] * k  # (B, 1) flat row of each beam 0
    # on the host: each row's sentence and length limit, the live hypotheses' tokens
    ids, spans = np.arange(b), np.array(limit.tolist(), dtype=np.int64)  # (N,), (N,)
    tokens = np.zeros((b, k, 0), dtype=np.int64)  # (N, K, L)
    read = np.full((b, k), bos_id, dtype=np.int64)  # (N, K) = ``last``
    finished = _Finished(b, nbest, alpha, prefix if p else None)
    length = 0
    while len(ids):
        length += 1
        n = len(ids)
        if on_tokens is not None:
            on_tokens(read.reshape(-1))
        logp = step(last.view(n * k, 1))  # (N*K, V)
        v = logp.size(-1)
        cand = log_probs[:, :, None] + logp.view(n, k, v)  # (N, K, V)
        top_scores, top_index = cand.view(n, k * v).topk(2 * k, dim=1)  # (N, 2K)
        is_eos = top_index % v == eos_id  # (N, 2K)
        # the best K candidates that are not eos live on
        live_scores = top_scores.masked_fill(is_eos, float("-inf"))
        log_probs, pick = live_scores.topk(k, dim=1)  # (N, K)
        chosen = top_index.gather(1, pick)  # (N, K) into (K, V)
        parents, last = first_row[:n] + chosen // v, chosen % v  # (N, K) flat rows, tokens
        columns = [log_probs.double(), top_scores[:, :k], top_index[:, :k], chosen]
        if alpha >= 0:  # a live log-probability only falls: its best is logP / lp(limit)
            best_live = log_probs.max(1).values.double()  # (N,)
            horizon = torch.full_like(limit, length + 1) if early_stop else limit
            reachable = best_live / length_penalty(horizon.double() + p, alpha)  # (N,)
            columns.append(reachable[:, None])
        host = _to_host(torch.cat(columns, 1))  # (N, 4K [+ 1]) float64: the one transfer
        live_host, top_host = host[:, :k], host[:, k : 2 * k]  # (N, K) scores
        top_at = host[:, 2 * k : 3 * k].astype(np.int64)  # (N, K) into (K, V)
        chosen_at = host[:, 3 * k : 4 * k].astype(np.int64)  # (N, K)

        # eos among the top K candidates finishes a hypothesis
        eos_rank = (top_at % v == eos_id) & np.isfinite(top_host)  # (N, K)
        for row, j in zip(*np.nonzero(eos_rank), strict=True):
            toks = tokens[row, top_at[row, j] // v].tolist()
            finished.add(ids[row], toks + [eos_id], float(top_host[row, j]))
        read = chosen_at % v  # (N, K)
        tokens = np.concatenate([tokens[np.arange(n)[:, None], chosen_at // v], read[..., None]], 2)

        # sentences at their length limit finish their live hypotheses as they are
        at_limit = length >= spans  # (N,)
        for row in np.flatnonzero(at_limit):
            for j in np.flatnonzero(np.isfinite(live_host[row])):
                finished.add(ids[row], tokens[row, j].tolist(), float(live_host[row, j]))

        # a sentence is done when no live hypothesis can beat its n-th best finished one
        if alpha >= 0:
            done = at_limit | (host[:, 4 * k] <= finished.nth_best[ids])
        else:  # the bound needs alpha >= 0; without it, stop at K finished
            done = at_limit | (finished.count[ids] >= k)
        if done.all():
            break
        if done.any():  # finished sentences leave the batch
            keep = np.flatnonzero(~done)  # (N',)
            index = torch.from_numpy(keep).to(device, non_blocking=True)
            parents, last, log_probs, limit = (
                x.index_select(0, index) for x in (parents, last, log_probs, limit)
            )
            ids, spans, tokens, read = ids[keep], spans[keep], tokens[keep], read[keep]
        reorder(parents.view(-1))  # follow the surviving beams
    return finished.best()


def _to_host(packed: Tensor) -> np.ndarray:
    """A step's table (N, C) on the host: beam search's one transfer (a host sync) per step."""
    return packed.cpu().numpy()


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
    """Beam search over an encoder-decoder for sources (B, S): n-best lists per sentence.

    The encoder runs once; the beams of a sentence share its memory, mask and cross-
    attention keys and values (computed once per sentence, never copied per beam); the
    decoder's self-attention KV cache follows the beams. ``prefix`` (B, P) of real target
    tokens begins every hypothesis: bos + prefix is read in one teacher-forced pass (per
    beam, filling the cache), and the search starts from its end.
    """
    from aiayn.infer.greedy import prefix_log_prob

    model.eval()
    config, b = model.config, src.size(0)
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
    return beam_search(
        step, reorder, b, beam, max_len, alpha, nbest, src.device, early_stop,
        config.bos_id, config.eos_id, prefixes, primed.get("log_prob"),
        on_tokens=_vouch(state, config.pad_id),
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
