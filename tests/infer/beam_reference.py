"""A straightforward beam search to check ``aiayn.infer.beam.beam_search`` against: the same
search with its bookkeeping done on the device and read back where needed (the hypotheses'
tokens gathered along the beams on the device, every finished one read back alone)."""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.config import BOS, EOS
from aiayn.infer.beam import Hypothesis, ReorderFn, StepFn, _finalize, length_penalty


def reference_beam_search(
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
) -> list[list[Hypothesis]]:
    """``aiayn.infer.beam.beam_search`` as first written: every bit of bookkeeping on the
    device, read back to the host hypothesis by hypothesis (several host syncs per step)."""
    b, k = batch_size, beam
    heads, p = prefix, len(prefix[0]) if prefix else 0
    if nbest > k:
        raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({k})")
    ids = torch.arange(b, device=device)  # (N,) the sentence of each row still searching
    limit = torch.as_tensor(max_len, device=device).expand(b).clone()  # (N,)
    tokens = torch.full((b, k, 1), bos_id, dtype=torch.long, device=device)  # (N, K, L)
    log_probs = torch.full((b, k), float("-inf"), device=device)  # (N, K) live hypotheses
    log_probs[:, 0] = 0.0  # all beams start identical: expand only the first
    if prefix_log_prob is not None:
        log_probs[:, 0] = prefix_log_prob.to(log_probs.dtype)
    limit = (limit - p).clamp(min=1)  # new tokens: the prefix counts in max_len
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    nth_best = torch.full((b,), float("-inf"), dtype=torch.float64, device=device)
    n_finished = torch.zeros(b, dtype=torch.long, device=device)

    def finalize(row: int, toks: list[int], log_prob: float) -> None:
        i = int(ids[row])
        _finalize(finished[i], (heads[i] + toks) if p else toks, log_prob, alpha)
        n_finished[i] += 1
        if len(finished[i]) >= nbest:
            nth_best[i] = sorted(h.score for h in finished[i])[-nbest]

    length = 0
    while ids.numel():
        length += 1
        n = ids.numel()
        logp = step(tokens[:, :, -1].reshape(n * k, 1))  # (N*K, V)
        v = logp.size(-1)
        cand = log_probs[:, :, None] + logp.view(n, k, v)  # (N, K, V)
        top_scores, top_index = cand.view(n, k * v).topk(2 * k, dim=1)  # (N, 2K)
        top_beam, top_token = top_index // v, top_index % v  # (N, 2K)
        is_eos = top_token == eos_id

        # eos among the top K candidates finishes a hypothesis
        eos_rank = is_eos[:, :k] & torch.isfinite(top_scores[:, :k])  # (N, K)
        for row, j in eos_rank.nonzero().tolist():
            prefix = tokens[row, top_beam[row, j], 1:].tolist()
            finalize(row, prefix + [eos_id], top_scores[row, j].item())

        # the best K candidates that are not eos live on
        live_scores = top_scores.masked_fill(is_eos, float("-inf"))
        log_probs, pick = live_scores.topk(k, dim=1)  # (N, K)
        new_beam = top_beam.gather(1, pick)  # (N, K)
        rows = torch.arange(n, device=device)[:, None] * k + new_beam  # (N, K) flat parents
        tokens = torch.cat(
            [
                tokens.view(n * k, -1)[rows.view(-1)].view(n, k, -1),
                top_token.gather(1, pick)[..., None],
            ],
            dim=2,
        )  # (N, K, L+1)

        # sentences at their length limit finish their live hypotheses as they are
        at_limit = length >= limit  # (N,)
        for row in at_limit.nonzero().flatten().tolist():
            for j in torch.isfinite(log_probs[row]).nonzero().flatten().tolist():
                finalize(row, tokens[row, j, 1:].tolist(), log_probs[row, j].item())

        # a sentence is done when no live hypothesis can beat its n-th best finished one
        if alpha >= 0:  # a live log-probability only falls: its best is logP / lp(limit)
            best_live = log_probs.max(1).values.double()  # (N,)
            horizon = torch.full_like(limit, length + 1) if early_stop else limit
            reachable = best_live / length_penalty(horizon.double() + p, alpha)
            done = at_limit | (reachable <= nth_best[ids])
        else:  # the bound needs alpha >= 0; without it, stop at K finished
            done = at_limit | (n_finished[ids] >= k)

        keep = ~done
        reorder(rows[keep].view(-1))  # follow the surviving beams; drop finished sentences
        tokens, log_probs = tokens[keep], log_probs[keep]
        ids, limit = ids[keep], limit[keep]
    return [sorted(h, key=lambda x: -x.score)[:nbest] for h in finished]
