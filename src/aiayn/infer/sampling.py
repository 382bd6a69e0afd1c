"""Sampling with temperature, top-k and top-p (Phuong & Hutter 2022, Algorithm 14)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor


def filter_logits(logits: Tensor, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """Keep the ``top_k`` most likely tokens and the smallest set whose mass reaches ``top_p``.

    ``logits`` (N, V); the rest become -inf. The most likely token always survives.
    """
    if top_k and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (N, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (N, V)
        probs = sorted_logits.softmax(-1)
        before = probs.cumsum(-1) - probs  # mass of the strictly better tokens
        drop_sorted = before >= top_p
        drop = drop_sorted.scatter(1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_next(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Draw one token per row of ``logits`` (N, V) from softmax(logits / temperature).

    A temperature of 0 is greedy (argmax). Returns (N, 1).
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k}")
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)
    logits = filter_logits(logits.float() / temperature, top_k, top_p)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)  # (N, 1)


@torch.no_grad()
def generate(
    model,
    prompt: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_id: int | None = None,
    seed: int | None = None,
    context: int | None = None,
) -> Tensor:
    """Continue ``prompt`` (B, T) with a decoder-only model and its KV cache; (B, T + n).

    ``context`` is the longest input the model was trained on (positions past it were never
    seen): once the cache holds that many tokens it is rebuilt from the last ``context // 2``,
    so the model always sees between half and all of its training context. Stops early when
    every row has produced ``eos_id``. With ``seed``, reproducible.
    """
    steps = generate_steps(
        model, prompt, max_new_tokens, temperature, top_k, top_p, eos_id, seed, context
    )
    return torch.cat([prompt, *steps], dim=1)


def generate_steps(
    model,
    prompt: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_id: int | None = None,
    seed: int | None = None,
    context: int | None = None,
) -> Iterator[Tensor]:
    """``generate`` one step at a time: yields each new token column (B, 1) as it is drawn.

    Rows that have produced ``eos_id`` repeat it; the iteration ends once every row has (or
    after ``max_new_tokens``). Stopping the iteration early stops the decoding, so a caller
    that streams tokens (a server) stops generating for a client that went away.
    """
    model.eval()
    generator = None
    if seed is not None:
        generator = torch.Generator(device=prompt.device).manual_seed(seed)
    if context is None:
        context = model.config.max_len
    if model.config.pos_encoding == "learned":
        context = min(context, model.config.max_len)
    state = model.new_state()
    tokens, new = prompt, prompt[:, -context:]
    done = torch.zeros(prompt.size(0), dtype=torch.bool, device=prompt.device)
    for _ in range(max_new_tokens):
        with torch.no_grad():
            if state.offset + new.size(1) > context:  # slide the window: re-encode the recent half
                state = model.new_state()
                new = tokens[:, -max(context // 2, 1) :]
            logits = model(new, state=state)[:, -1]  # (B, V)
            new = sample_next(logits, temperature, top_k, top_p, generator)  # (B, 1)
        if eos_id is not None:
            new = new.masked_fill(done[:, None], eos_id)
            done |= new[:, 0] == eos_id
        tokens = torch.cat([tokens, new], dim=1)
        yield new
        if eos_id is not None and done.all():
            break
