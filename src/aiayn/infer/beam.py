"""Batched beam search with the GNMT length penalty (Vaswani et al. 2017 §6.1; Wu et al. 2016).

Written as pure functions over a step function and a shape-annotated ``BeamState``, so the
search can be tested against a scripted decoder with hand-set probabilities.

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

import torch
from torch import Tensor

from aiayn.data.tokenizer import BOS, EOS, PAD

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


@dataclass
class BeamState:
    tokens: Tensor  # (B, K, L) generated so far, bos first
    log_probs: Tensor  # (B, K) cumulative log-probabilities of live hypotheses
    done: Tensor  # (B,) sentence finished


def _finalize(hyps: list[Hypothesis], tokens: list[int], log_prob: float, alpha: float) -> None:
    score = log_prob / length_penalty(len(tokens), alpha)
    hyps.append(Hypothesis(tokens, score, log_prob))


@torch.no_grad()
def beam_search(
    step: StepFn,
    reorder: ReorderFn,
    batch_size: int,
    beam: int,
    max_len: Tensor,
    alpha: float = 0.6,
    nbest: int = 1,
    device: torch.device | str = "cpu",
) -> list[list[Hypothesis]]:
    """n-best hypotheses per sentence, best first.

    ``step`` maps each live hypothesis's last token (B*K, 1) to next-token log-probs
    (B*K, V), reading whatever it keeps (e.g. a KV cache) in beam order; ``reorder(index)``
    re-orders that state after each step. ``max_len`` (B,) caps each sentence's length.
    """
    b, k = batch_size, beam
    if nbest > k:
        raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({k})")
    max_len = torch.as_tensor(max_len, device=device).expand(b)
    state = BeamState(
        tokens=torch.full((b, k, 1), BOS, dtype=torch.long, device=device),
        log_probs=torch.full((b, k), float("-inf"), device=device),
        done=torch.zeros(b, dtype=torch.bool, device=device),
    )
    state.log_probs[:, 0] = 0.0  # all beams start identical: expand only the first
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    base = (torch.arange(b, device=device) * k)[:, None]  # (B, 1)
    length = 0
    while not state.done.all():
        length += 1
        logp = step(state.tokens[:, :, -1].reshape(b * k, 1))  # (B*K, V)
        v = logp.size(-1)
        cand = state.log_probs[:, :, None] + logp.view(b, k, v)  # (B, K, V)
        top_scores, top_index = cand.view(b, k * v).topk(2 * k, dim=1)  # (B, 2K)
        top_beam, top_token = top_index // v, top_index % v  # (B, 2K)
        is_eos = top_token == EOS

        # eos among the top K candidates finishes a hypothesis
        eos_rank = is_eos & (torch.arange(2 * k, device=device) < k)  # (B, 2K)
        eos_rank &= ~state.done[:, None] & torch.isfinite(top_scores)
        for i, j in eos_rank.nonzero().tolist():
            prefix = state.tokens[i, top_beam[i, j], 1:].tolist()
            _finalize(finished[i], prefix + [EOS], top_scores[i, j].item(), alpha)

        # the best K candidates that are not eos live on
        live_scores = top_scores.masked_fill(is_eos, float("-inf"))
        live_scores, pick = live_scores.topk(k, dim=1)  # (B, K)
        new_beam = top_beam.gather(1, pick)  # (B, K)
        new_token = top_token.gather(1, pick)  # (B, K)
        flat = (base + new_beam).view(-1)  # (B*K,)
        reorder(flat)
        state.tokens = torch.cat(
            [
                state.tokens.view(b * k, -1).index_select(0, flat).view(b, k, -1),
                new_token[..., None],
            ],
            dim=2,
        )  # (B, K, L+1)
        state.log_probs = live_scores

        # sentences at their length limit finish their live hypotheses as they are
        at_limit = (length >= max_len) & ~state.done
        for i in at_limit.nonzero().flatten().tolist():
            for j in range(k):
                if torch.isfinite(state.log_probs[i, j]):
                    tokens = state.tokens[i, j, 1:].tolist()
                    _finalize(finished[i], tokens, state.log_probs[i, j].item(), alpha)
        state.done |= at_limit

        # a sentence is done when no live hypothesis can beat its n-th best finished one
        for i in (~state.done).nonzero().flatten().tolist():
            if len(finished[i]) < nbest:
                continue
            nth = sorted(h.score for h in finished[i])[-nbest]
            best_live = state.log_probs[i].max().item()
            reachable = best_live / length_penalty(max_len[i].item(), alpha)
            if alpha < 0:  # the bound above needs alpha >= 0; without it, stop at K finished
                reachable = float("inf") if len(finished[i]) < k else float("-inf")
            if reachable <= nth:
                state.done[i] = True
        state.log_probs = state.log_probs.masked_fill(state.done[:, None], float("-inf"))
    return [sorted(h, key=lambda x: -x.score)[:nbest] for h in finished]


@torch.no_grad()
def beam_decode(
    model,
    src: Tensor,
    beam: int = 4,
    alpha: float = 0.6,
    max_len_offset: int = 50,
    nbest: int = 1,
) -> list[list[Hypothesis]]:
    """Beam search over an encoder-decoder for sources (B, S): n-best lists per sentence.

    The encoder runs once; its memory and mask are repeated per beam; the decoder keeps a
    KV cache that follows the beams.
    """
    model.eval()
    b = src.size(0)
    memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    memory = memory.repeat_interleave(beam, dim=0)  # (B*K, S, D)
    state = model.new_state(src_mask.repeat_interleave(beam, dim=0))
    max_len = (src != PAD).sum(1) + max_len_offset  # (B,)
    if model.config.pos_encoding == "learned":
        max_len = max_len.clamp(max=model.config.max_len)

    def step(tokens: Tensor) -> Tensor:
        logits = model.decode(tokens, memory, state=state)[:, -1]  # (B*K, V)
        return torch.log_softmax(logits.float(), dim=-1)

    return beam_search(step, state.reorder, b, beam, max_len, alpha, nbest, src.device)


def best_tokens(hyps: list[list[Hypothesis]]) -> Tensor:
    """The best hypothesis of each sentence as a padded (B, L) tensor."""
    rows = [h[0].tokens if h else [EOS] for h in hyps]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long)
