"""Sampling with temperature, top-k and top-p for both generating families.

Phuong & Hutter 2022, Algorithm 14 (DInference: a decoder-only model continues a prompt,
``generate``) and Algorithm 15 (EDInference: an encoder-decoder samples a target sequence for
each source, ``sample_decode``). Both run the one routine ``sample_search`` over a step
function, as ``beam_search`` does: it draws each row's next token from
softmax(filter(logits / temperature)), keeps the KV cache in step with the live rows, and
drops a row from the batch once it has made eos or reached its own length limit.

Reproducibility: every row draws its random numbers from its own ``torch.Generator``
(``row_generators`` derives their seeds from one seed and the row's identity, e.g. the
sentence's index in the input and the sample's number), and a draw is an inverse-CDF lookup
of one uniform number per row. So a row's samples do not depend on which other rows share its
batch, nor on how many there are.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.config import EOS, PAD
from aiayn.errors import OptionError
from aiayn.infer.beam import Hypothesis
from aiayn.infer.mode import decoding

# every token so far of each live row (N, L) -> next-token logits (N, V)
StepFn = Callable[[Tensor], Tensor]
ReorderFn = Callable[[Tensor], None]  # rows to keep (N',) -> None


def check_settings(temperature: float, top_k: int | None, top_p: float) -> None:
    """``OptionError`` (a ``ValueError``) naming the setting unless 0 <= temperature < inf
    (0 = greedy), top_k >= 0 (0 or None = no top-k filter) and 0 < top_p <= 1; NaN is
    rejected."""
    if not (temperature >= 0 and math.isfinite(temperature)):
        raise OptionError(
            f"temperature must be a finite number >= 0 (0 = greedy), got {temperature}",
            "temperature",
        )
    if top_k is not None and top_k < 0:
        raise OptionError(f"top_k must be >= 0 (0 = no top-k filter), got {top_k}", "top_k")
    if not 0.0 < top_p <= 1.0:
        raise OptionError(f"top_p must be in (0, 1], got {top_p}", "top_p")


@dataclass(frozen=True)
class Sampling:
    """How to sample (Phuong & Hutter 2022, Algorithms 14 and 15).

    ``temperature`` 0 is greedy (the limit temperature -> 0); ``top_k`` None keeps every
    token, else the k most likely; ``top_p`` keeps the smallest set of most likely tokens
    whose mass reaches p (1 = all); ``seed`` seeds every sentence's own generator, so a
    sentence samples the same in any batch (None: torch's global generator, a fresh draw
    each call). Invalid settings raise ``aiayn.errors.OptionError`` naming the field::

        aiayn.Sampling(temperature=0.8, top_p=0.95, seed=1)
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    seed: int | None = 0

    def __post_init__(self) -> None:
        if self.top_k is not None and (isinstance(self.top_k, bool) or self.top_k < 1):
            raise OptionError(
                f"top_k must be >= 1 (or None: no top-k filter), got {self.top_k}", "top_k"
            )
        check_settings(self.temperature, self.top_k, self.top_p)
        if self.seed is not None and self.seed < 0:
            raise OptionError(f"seed must be >= 0, got {self.seed}", "seed")


def row_seed(seed: int, *keys: int) -> int:
    """A 63-bit seed for the row identified by ``keys`` (e.g. sentence index, sample number),
    the same in every process and on every platform."""
    data = ",".join(str(int(k)) for k in (seed, *keys)).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") >> 1


def row_generators(seed: int, indices: Sequence[int], n: int = 1) -> list[torch.Generator]:
    """One CPU generator per (index, sample) pair, index-major: ``n`` rows for each index.

    CPU generators wherever the model runs: a row draws the same uniform numbers on every
    device (its samples can then differ only where the logits' rounding does).
    """
    return [torch.Generator().manual_seed(row_seed(seed, i, j)) for i in indices for j in range(n)]


def filter_logits(logits: Tensor, top_k: int | None = 0, top_p: float = 1.0) -> Tensor:
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
        drop_sorted[:, 0] = False  # the most likely token stays, however small top_p is
        drop = drop_sorted.scatter(1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sampling_distribution(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = 0, top_p: float = 1.0
) -> Tensor:
    """softmax(filter(logits / temperature)): what a token is drawn from; (N, V) float32."""
    check_settings(temperature, top_k, top_p)
    if temperature == 0:
        raise ValueError("temperature 0 is greedy: there is no distribution to draw from")
    return filter_logits(logits.float() / temperature, top_k, top_p).softmax(-1)


def _uniforms(n: int, generator, device: torch.device) -> Tensor:
    """(n,) uniform numbers in [0, 1) on ``device``, drawn on each generator's own device:
    from one generator for all rows, or from each row's own when given a sequence."""
    if generator is None:
        return torch.rand(n, device=device)
    if isinstance(generator, torch.Generator):
        return torch.rand(n, generator=generator, device=generator.device).to(device)
    if len(generator) != n:
        raise ValueError(f"{len(generator)} generators for {n} rows")
    draws = [torch.rand(1, generator=g, device=g.device).cpu() for g in generator]
    return (torch.cat(draws) if draws else torch.empty(0)).to(device)  # one copy to the device


def sample_next(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = 0,
    top_p: float = 1.0,
    generator: torch.Generator | Sequence[torch.Generator] | None = None,
) -> Tensor:
    """Draw one token per row of ``logits`` (N, V) from softmax(filter(logits / temperature)).

    A temperature of 0 is greedy (argmax). ``generator``: one for all rows, or a sequence
    with one per row (a row's draw then depends on its generator and its logits only).
    Returns (N, 1).
    """
    check_settings(temperature, top_k, top_p)
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)
    probs = sampling_distribution(logits, temperature, top_k, top_p)  # (N, V)
    cdf = probs.double().cumsum(-1)  # (N, V); float64 so that u * total < total
    u = _uniforms(logits.size(0), generator, logits.device).double() * cdf[:, -1]  # (N,)
    # the first token whose cumulative mass exceeds u: a token of mass 0 is never drawn
    return torch.searchsorted(cdf, u[:, None], right=True)  # (N, 1)


def sample_steps(
    step: StepFn,
    reorder: ReorderFn,
    start: Tensor,
    max_new: Tensor | int,
    temperature: float = 1.0,
    top_k: int | None = 0,
    top_p: float = 1.0,
    generators: Sequence[torch.Generator] | None = None,
    eos_id: int | None = EOS,
    exclude: Sequence[int] = (),
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """The loop of ``sample_search``, one step at a time: yields, for each step, the live
    rows of ``start`` (N,), the token each drew (N, 1) and its log-probability under the
    model (N,). Stopping the iteration stops the decoding (a server streaming to a client
    that went away)."""
    check_settings(temperature, top_k, top_p)
    b, device = start.size(0), start.device
    limit = torch.as_tensor(max_new, device=device).expand(b)  # (B,)
    if generators is not None and len(generators) != b:
        raise ValueError(f"{len(generators)} generators for {b} rows")
    steps = int(limit.max()) if b else 0
    rows = torch.arange(b, device=device)  # (N,) the row of ``start`` of each live row
    excluded = torch.tensor(list(exclude), dtype=torch.long, device=device)
    tokens = start
    for s in range(steps):
        with torch.no_grad():
            logits = step(tokens)  # (N, V)
            gens = None if generators is None else [generators[r] for r in rows.tolist()]
            allowed = logits.index_fill(1, excluded, float("-inf")) if len(exclude) else logits
            token = sample_next(allowed, temperature, top_k, top_p, gens)  # (N, 1)
            log_prob = torch.log_softmax(logits.float(), -1).gather(1, token)[:, 0]  # (N,)
        yield rows, token, log_prob.double()
        tokens = torch.cat([tokens, token], dim=1)  # (N, L + 1)
        done = limit[rows] <= s + 1  # (N,)
        if eos_id is not None:
            done |= token[:, 0] == eos_id
        if done.any():
            keep = (~done).nonzero().squeeze(1)  # (N',)
            if keep.numel() == 0:
                break
            rows, tokens = rows[keep], tokens[keep]
            reorder(keep)


@decoding
def sample_search(
    step: StepFn,
    reorder: ReorderFn,
    start: Tensor,
    max_new: Tensor | int,
    temperature: float = 1.0,
    top_k: int | None = 0,
    top_p: float = 1.0,
    generators: Sequence[torch.Generator] | None = None,
    eos_id: int | None = EOS,
    pad_id: int = PAD,
    exclude: Sequence[int] = (),
) -> tuple[Tensor, Tensor]:
    """Sample a continuation of every row of ``start`` (B, L0); the new tokens (B, L) and
    their log-probabilities under the model (B,), float64.

    ``step`` maps every token so far of each live row (N, L) to next-token logits (N, V)
    (a cached step feeds only the tokens it has not seen); ``reorder(keep)`` drops the rows
    of its state that leave the batch. A row stops after eos (``eos_id``; None: never) or
    after ``max_new`` (B,) tokens, and then leaves the batch. ``generators`` (B,) gives each
    row its own random numbers. The log-probability is under softmax(logits): the model's,
    at temperature 1 and unfiltered, whatever the sampling settings. The output is padded
    with ``pad_id`` after a row's last token. Tokens in ``exclude`` are never drawn.
    """
    b, device = start.size(0), start.device
    steps = int(torch.as_tensor(max_new).max()) if b else 0
    out = torch.full((b, steps), pad_id, dtype=torch.long, device=device)
    log_prob = torch.zeros(b, dtype=torch.float64, device=device)
    width = 0
    drawn = sample_steps(
        step, reorder, start, max_new, temperature, top_k, top_p, generators, eos_id, exclude
    )
    for s, (rows, token, lp) in enumerate(drawn):
        out[rows, s] = token[:, 0]
        log_prob[rows] += lp
        width = s + 1
    return out[:, :width], log_prob  # (B, L), (B,)


@decoding
def sample_decode(
    model,
    src: Tensor,
    temperature: float = 1.0,
    top_k: int | None = 0,
    top_p: float = 1.0,
    generators: Sequence[torch.Generator] | None = None,
    n: int = 1,
    max_len_offset: int = 50,
    prefix: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """Sample ``n`` target sequences per source (B, S) from an encoder-decoder (Phuong &
    Hutter 2022, Algorithm 15, EDInference, with top-k / top-p filters added).

    The encoder runs once per source; its memory is repeated for the ``n`` samples, and the
    decoder keeps a KV cache. Each sample stops at eos or at its source length +
    ``max_len_offset`` (Vaswani et al. 2017 §6.1). ``generators`` (B * n, source-major, e.g.
    from ``row_generators``) make it reproducible, and a sentence samples the same in any
    batch. The padding token is never drawn (it is never a target in training; its
    logit is set to -inf before temperature and filters). Returns, per source, its ``n``
    samples in the order drawn, each with its log-probability under the model as ``score``
    and ``log_prob``; tokens end with eos where one was made. ``prefix`` (B, P) of real
    target tokens begins every sample: read in one teacher-forced pass, counted in the
    length limit and in the log-probability.
    """
    from aiayn.infer.greedy import prefix_log_prob

    if n < 1:
        raise ValueError(f"n (samples per sentence) must be >= 1, got {n}")
    model.eval()
    config, b = model.config, src.size(0)
    memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    if n > 1:
        memory = memory.repeat_interleave(n, dim=0)  # (B*n, S, D)
        src_mask = src_mask.repeat_interleave(n, dim=0)  # (B*n, 1, 1, S)
    state = model.new_state(src_mask)
    limit = (src != config.pad_id).sum(1) + max_len_offset  # (B,)
    limit = config.clamp_length(limit).repeat_interleave(n)  # (B*n,) within a learned table
    p = 0 if prefix is None else prefix.size(1)
    prefixes = prefix.repeat_interleave(n, dim=0) if p else None  # (B*n, P)
    live = {"memory": memory, "prefix_log_prob": torch.zeros(b * n, dtype=torch.float64)}

    def step(tokens: Tensor) -> Tensor:
        logits = model.decode(tokens[:, state.length :], live["memory"], state=state)
        if logits.size(1) > 1:  # the prefix's pass (every row still there)
            live["prefix_log_prob"] = prefix_log_prob(logits, prefixes).cpu()
        return logits[:, -1]  # (N, V)

    def reorder(keep: Tensor) -> None:
        live["memory"] = live["memory"][keep]
        state.reorder(keep)

    start = torch.full((b * n, 1), config.bos_id, dtype=torch.long, device=src.device)
    if p:
        start = torch.cat([start, prefixes], 1)  # (B*n, 1 + P)
    out, log_prob = sample_search(
        step, reorder, start, (limit - p).clamp(min=1), temperature, top_k, top_p, generators,
        config.eos_id, config.pad_id, exclude=[config.pad_id],
    )  # fmt: skip
    log_prob = log_prob.cpu() + live["prefix_log_prob"]
    heads = prefixes.tolist() if p else [[] for _ in range(b * n)]
    hyps = []
    for head, row, lp in zip(heads, out.tolist(), log_prob.tolist(), strict=True):
        hyps.append(Hypothesis(head + [t for t in row if t != config.pad_id], lp, lp))
    return [hyps[i * n : (i + 1) * n] for i in range(b)]


@decoding
def generate(
    model,
    prompt: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = 0,
    top_p: float = 1.0,
    eos_id: int | None = None,
    seed: int | None = None,
    context: int | None = None,
) -> Tensor:
    """Continue ``prompt`` (B, T) with a decoder-only model and its KV cache; (B, T + n)
    (Phuong & Hutter 2022, Algorithm 14, DInference, with top-k / top-p filters added).

    ``context`` is the longest input the model was trained on (positions past it were never
    seen): once the cache holds that many tokens it is rebuilt from the last ``context // 2``,
    so the model always sees between half and all of its training context. A row stops at
    ``eos_id`` (then filled with it) and leaves the batch. With ``seed``, reproducible: row
    i draws from its own generator (``row_seed(seed, i)``).
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
    top_k: int | None = 0,
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
    generators = None
    if seed is not None:
        generators = row_generators(seed, range(prompt.size(0)))
    context = model.config.clamp_length(model.config.max_len if context is None else context)
    live = {"state": model.new_state(), "fresh": True}

    def step(tokens: Tensor) -> Tensor:
        state = live["state"]
        new = tokens[:, -context:] if live["fresh"] else tokens[:, -1:]
        live["fresh"] = False
        if state.offset + new.size(1) > context:  # slide the window: re-encode the recent half
            state = live["state"] = model.new_state()
            new = tokens[:, -max(context // 2, 1) :]
        return model(new, state=state)[:, -1]  # (N, V)

    def reorder(keep: Tensor) -> None:
        live["state"].reorder(keep)

    fill = model.config.pad_id if eos_id is None else eos_id  # what a finished row repeats
    drawn = sample_steps(
        step, reorder, prompt, max_new_tokens, temperature, top_k, top_p, generators, eos_id
    )
    for rows, token, _ in drawn:
        column = torch.full((prompt.size(0), 1), fill, dtype=torch.long, device=prompt.device)
        column[rows] = token  # (B, 1)
        yield column
