"""Greedy decoding for the encoder-decoder, with the KV cache: Phuong & Hutter 2022,
Algorithm 15 (EDInference) in the limit temperature -> 0 (``sampling.sample_decode`` samples)."""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.infer.mode import decoding


@decoding
def greedy_decode(
    model, src: Tensor, max_len_offset: int = 50, max_len: int | None = None
) -> Tensor:
    """Most likely next token at each step until eos; (B, S) sources to (B, L) token ids
    (``greedy_search`` without the log-probabilities): Phuong & Hutter 2022, Algorithm 15 in
    the limit temperature -> 0."""
    return greedy_search(model, src, max_len_offset, max_len, scores=False)[0]


@decoding
def greedy_search(
    model,
    src: Tensor,
    max_len_offset: int = 50,
    max_len: int | None = None,
    scores: bool = True,
    prefix: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Most likely next token at each step until eos: (B, S) sources to (B, L) token ids and
    each output's log-probability under the model (B,), float64 (None when ``scores`` is
    False: no step then sums the exponentials of its logits).

    Phuong & Hutter 2022, Algorithm 15 in the limit temperature -> 0.

    Each sentence stops at its own source length + ``max_len_offset`` (Vaswani et al. 2017
    §6.1), or at ``max_len``. Finished sentences get no logits; they leave the batch (their
    rows of the KV cache go too) once a quarter of its rows are finished, so that the
    rows are re-indexed a few times per batch rather than at every step where a sentence
    ends. Each sentence decodes as it would alone. The output holds no bos, ends with eos
    where one was made, and is padded (with the config's pad id).

    ``prefix`` (B, P) of real target tokens (no bos): each output begins with it, read in one
    teacher-forced pass, and the search goes on from its end; the log-probability is that of
    the whole output, prefix included, and the length limit counts it.
    """
    model.eval()
    config = model.config
    memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    state = model.new_state(src_mask)
    b, device = src.size(0), src.device
    if max_len is None:
        limit = (src != config.pad_id).sum(1) + max_len_offset  # (B,)
    else:
        limit = torch.full((b,), max_len, dtype=torch.long, device=device)
    limit = config.clamp_length(limit)  # no positions past a learned table
    p = 0 if prefix is None else prefix.size(1)
    limit = limit.clamp(min=p + 1)  # at least one token after the prefix
    steps = int(limit.max()) if b else 0
    out = torch.full((b, steps), config.pad_id, dtype=torch.long, device=device)
    log_prob = torch.zeros(b, dtype=torch.float64, device=device)
    rows = torch.arange(b, device=device)  # (N,) the sentence of each row of the batch
    live = torch.ones(b, dtype=torch.bool, device=device)  # (N,) rows still decoding
    token = torch.full((b, 1), config.bos_id, dtype=torch.long, device=device)
    if p:
        out[:, :p] = prefix
        token = torch.cat([token, prefix], 1)  # (B, 1 + P): read in one pass
    width, n_live = p, b
    for step in range(p, steps):
        select = None if n_live == len(rows) else live[:, None]  # (N, 1): no finished logits
        logits = model.decode(token, memory, state=state, select=select)  # (N, t, V) | (n, V)
        if token.size(1) > 1:  # the prefix's pass: its log-probability, then its last logits
            if scores:
                log_prob += prefix_log_prob(logits, prefix)
            logits, token = logits[:, -1], token[:, -1:].clone()
        logits = logits.reshape(n_live, -1).float()  # (n, V)
        best, new = logits.max(-1)  # (n,), (n,): one pass, 2-3x faster than argmax
        sentence = rows[live] if select is not None else rows  # (n,)
        out[sentence, step] = new
        if scores:
            log_prob[sentence] += _log_prob_of_max(logits, best)
        width = step + 1
        ended = (new == config.eos_id) | (limit[sentence] <= width)  # (n,)
        if select is not None:  # finished rows read eos: a real token, never looked at
            token = torch.full_like(token, config.eos_id)
        token[live, 0] = new
        if ended.any():
            live[live.clone()] = ~ended
            n_live = int(live.sum())
            if n_live == 0:
                break
            if len(rows) - n_live >= max(1, len(rows) // 4):  # leave the batch
                keep = live.nonzero().squeeze(1)  # (N',)
                rows, token, live = rows[keep], token[keep], live[keep]
                state.reorder(keep)  # memory itself is read on the first step only
    return out[:, :width], (log_prob if scores else None)  # (B, L), (B,)


def prefix_log_prob(logits: Tensor, prefix: Tensor) -> Tensor:
    """log P(prefix | source) (R,), float64, from the logits (R, 1 + P, V) of the pass over
    bos + ``prefix`` (R, P): position i's distribution scores prefix token i."""
    log_probs = logits[:, :-1].float().log_softmax(-1)  # (R, P, V)
    return log_probs.gather(-1, prefix[..., None]).squeeze(-1).double().sum(-1)  # (R,)


def _log_prob_of_max(logits: Tensor, best: Tensor) -> Tensor:
    """log softmax(logits) at each row's maximum ``best`` (n,): -log sum_v exp(l_v - best),
    without writing out the whole (n, V) log-softmax to read one entry of each row."""
    return (logits - best[:, None]).exp_().sum(-1).log_().neg_()  # (n,)
