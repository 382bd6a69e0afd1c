"""Greedy decoding for the encoder-decoder, with the KV cache: Phuong & Hutter 2022,
Algorithm 15 (EDInference) in the limit temperature -> 0 (``sampling.sample_decode`` samples)."""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.infer.mode import decoding

# Steps between looks at which sentences have finished, off the CPU: each look waits for the
# device to finish its queued work (a host sync), which leaves it idle while the host prepares
# the next step. On a CPU the look costs nothing and is made at every step.
CHECK_EVERY = 8


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
    check_every: int | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Most likely next token at each step until eos: (B, S) sources to (B, L) token ids and
    each output's log-probability under the model (B,), float64 (None when ``scores`` is
    False: no step then sums the exponentials of its logits).

    Phuong & Hutter 2022, Algorithm 15 in the limit temperature -> 0.

    Each sentence stops at its own source length + ``max_len_offset`` (Vaswani et al. 2017
    §6.1), or at ``max_len``. Finished sentences get no logits (looking at every step); they
    leave the batch (their rows of the KV cache go too) once a quarter of its rows are
    finished, so that the rows are re-indexed a few times per batch rather than at every step
    where a sentence ends. Each sentence decodes as it would alone. The output holds no bos, ends with eos
    where one was made, and is padded (with the config's pad id).

    ``prefix`` (B, P) of real target tokens (no bos): each output begins with it, read in one
    teacher-forced pass, and the search goes on from its end; the log-probability is that of
    the whole output, prefix included, and the length limit counts it.

    ``check_every``: steps between looks at which sentences have finished (default 1 on a
    CPU, ``CHECK_EVERY`` on other devices, where each look is a host sync). Between looks the
    finished sentences stay in the batch, read eos and emit nothing; the outputs are the same.
    """
    model.eval()
    every = check_every if check_every is not None else 1 if src.is_cpu else CHECK_EVERY
    if every < 1:
        raise ValueError(f"check_every must be >= 1, got {every}")
    if every > 1:
        found = _search(model, src, max_len_offset, max_len, scores, prefix, every)
        if found is not None:
            return found
        # a row read the pad id back: the state would have masked it from then on, as a step
        # that looks every time does; search again that way
    found = _search(model, src, max_len_offset, max_len, scores, prefix, 1)
    assert found is not None
    return found


def _search(
    model, src, max_len_offset, max_len, scores, prefix, every
) -> tuple[Tensor, Tensor | None] | None:
    """``greedy_search`` looking at the finished rows every ``every`` steps: the outputs, or
    None where a look found that a row read the pad id (only ``every`` 1 masks it)."""
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
    token = torch.full((b, 1), config.bos_id, dtype=torch.long, device=device)
    if p:
        out[:, :p] = prefix
        token = torch.cat([token, prefix], 1)  # (B, 1 + P): read in one pass
    total = log_prob if scores else None
    if every == 1:
        width = _each_step(model, memory, state, token, limit, out, total)
    else:
        width = _windowed(model, memory, state, token, limit, out, total, every)
    if width is None:
        return None
    return out[:, :width], (log_prob if scores else None)  # (B, L), (B,)


def _each_step(model, memory, state, token, limit, out, log_prob) -> int:
    """The search looking at every step: finished rows get no logits. Fills ``out`` (B, T)
    and ``log_prob`` (B,) (if not None); returns the output's width."""
    config = model.config
    b, p = out.size(0), token.size(1) - 1
    prefix = token[:, 1:]
    rows = torch.arange(b, device=out.device)  # (N,) the sentence of each row of the batch
    live = torch.ones(b, dtype=torch.bool, device=out.device)  # (N,) rows still decoding
    width, n_live = p, b
    for step in range(p, out.size(1)):
        select = None if n_live == len(rows) else live[:, None]  # (N, 1): no finished logits
        logits = model.decode(token, memory, state=state, select=select)  # (N, t, V) | (n, V)
        if token.size(1) > 1:  # the prefix's pass: its log-probability, then its last logits
            if log_prob is not None:
                log_prob += prefix_log_prob(logits, prefix)
            logits, token = logits[:, -1], token[:, -1:].clone()
        logits = logits.reshape(n_live, -1).float()  # (n, V)
        best, new = logits.max(-1)  # (n,), (n,): one pass, 2-3x faster than argmax
        sentence = rows[live] if select is not None else rows  # (n,)
        out[sentence, step] = new
        if log_prob is not None:
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
    return width


def _windowed(model, memory, state, token, limit, out, log_prob, every) -> int | None:
    """The search looking at the finished rows every ``every`` steps, one transfer to the
    host each time, and at no other step: in between, finished rows stay in the batch, read
    eos (so every token read is real and the state need not check) and emit pad with no
    log-probability. Rows leave the batch at a look, by the rule of ``_each_step``. Returns
    the output's width, or None where a row read the pad id back (``_each_step`` masks it)."""
    config = model.config
    b, p, device = out.size(0), token.size(1) - 1, out.device
    prefix = token[:, 1:]
    rows = torch.arange(b, device=device)  # (N,) the sentence of each row of the batch
    live = torch.ones(b, dtype=torch.bool, device=device)  # (N,) rows still decoding
    made, span = out.clone(), limit  # (N, T) the rows' outputs, (N,) their length limits
    total = None if log_prob is None else log_prob.clone()  # (N,)
    read_pad = torch.zeros((), dtype=torch.bool, device=device)  # a row read the pad id
    state.tokens_real = p == 0  # bos, argmax tokens and eos: checked on the device below
    for step in range(p, out.size(1)):
        logits = model.decode(token, memory, state=state)  # (N, t, V)
        if token.size(1) > 1:  # the prefix's pass: its log-probability, then its last logits
            if total is not None:
                total += prefix_log_prob(logits, prefix)
            logits, state.tokens_real = logits[:, -1], True
        logits = logits.reshape(len(made), -1).float()  # (N, V)
        best, new = logits.max(-1)  # (N,), (N,)
        made[:, step] = new.where(live, config.pad_id)  # finished rows emit nothing
        if total is not None:
            total += _log_prob_of_max(logits, best).where(live, 0.0)
        token = new.where(live, config.eos_id)[:, None]  # (N, 1) rows finished before: eos
        read_pad |= (token == config.pad_id).any()
        live &= (new != config.eos_id) & (span > step + 1)
        if (step + 1 - p) % every and step + 1 < out.size(1):
            continue
        seen = torch.cat([live, read_pad[None]]).tolist()  # the look: one transfer
        if seen.pop():
            return None
        kept = [i for i, x in enumerate(seen) if x]
        if not kept:
            break
        if len(seen) - len(kept) >= max(1, len(seen) // 4):  # leave the batch
            _write_back(out, log_prob, rows, made, total)
            keep = torch.tensor(kept).to(device, non_blocking=True)  # (N',)
            rows, live, token, span = rows[keep], live[keep], token[keep], span[keep]
            made, total = made[keep], None if total is None else total[keep]
            state.reorder(keep)  # memory itself is read on the first step only
    _write_back(out, log_prob, rows, made, total)
    # a live row emits a real token (pad would have been read back), so the output ends at
    # the last column where some row emitted one
    emitted = (out[:, p:] != config.pad_id).any(0).tolist()  # (T - P,)
    return p + max((i + 1 for i, x in enumerate(emitted) if x), default=0)


def _write_back(out, log_prob, rows, made, total) -> None:
    """The batch's rows ``made`` (N, T) and ``total`` (N,) into sentences ``rows`` (N,)."""
    out.index_copy_(0, rows, made)
    if total is not None:
        log_prob.index_copy_(0, rows, total)


def prefix_log_prob(logits: Tensor, prefix: Tensor) -> Tensor:
    """log P(prefix | source) (R,), float64, from the logits (R, 1 + P, V) of the pass over
    bos + ``prefix`` (R, P): position i's distribution scores prefix token i."""
    log_probs = logits[:, :-1].float().log_softmax(-1)  # (R, P, V)
    return log_probs.gather(-1, prefix[..., None]).squeeze(-1).double().sum(-1)  # (R,)


def _log_prob_of_max(logits: Tensor, best: Tensor) -> Tensor:
    """log softmax(logits) at each row's maximum ``best`` (n,): -log sum_v exp(l_v - best),
    without writing out the whole (n, V) log-softmax to read one entry of each row."""
    return (logits - best[:, None]).exp_().sum(-1).log_().neg_()  # (n,)
