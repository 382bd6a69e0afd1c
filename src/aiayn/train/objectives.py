"""Training losses. Models return logits; every loss lives here."""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint


def label_smoothed_nll(
    logits: Tensor,
    target: Tensor,
    smoothing: float,
    pad_id: int,
    selected: bool = False,
    every_class: bool | None = None,
) -> tuple[Tensor, Tensor, int]:
    """Summed label-smoothed cross-entropy over non-pad targets (Vaswani et al. 2017 §5.4).

    The target distribution puts 1 - smoothing on the reference token and spreads
    ``smoothing`` evenly over the other classes except padding and the ids the model cannot
    produce (logit -inf, e.g. a ``final_logits_bias`` of -inf); padding positions get nothing.
    Returns (smoothed loss sum, plain NLL sum, number of target tokens).
    ``logits`` (N, V), ``target`` (N,); ``selected``: the caller has already dropped the
    padding positions (the model unembedded only real targets). ``every_class``: whether
    every class is possible in every row (no logit is -inf), when the caller knows it (an
    unembedding without a bias); None checks the logits, a host sync on a GPU.
    """
    logits = logits.reshape(-1, logits.size(-1))  # (N, V)
    tgt = target.reshape(-1)  # (N,)
    if not selected:
        keep = tgt != pad_id  # (N,)
        logits, tgt = logits[keep], tgt[keep]  # (n, V), (n,)
    logp = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # (n, V)
    nll = -logp.gather(1, tgt[:, None]).squeeze(1)  # (n,)
    if smoothing <= 0.0:
        return nll.sum(), nll.sum().detach(), tgt.numel()
    total = logp.sum(-1)  # (n,)
    if every_class is None:  # a host check: free on the CPU, a sync on a GPU
        every_class = bool(torch.isfinite(total).all())
    if every_class:
        # every class possible (the common case): the sum over the classes other than pad
        # and the target is the row sum less those two, with no (n, V) mask
        others = -(total - logp[:, pad_id]) - nll  # (n,)
        n_others = logp.size(-1) - 2
    else:
        possible = torch.isfinite(logp)  # (n, V)
        possible[:, pad_id] = False
        # -sum log p over the possible classes other than pad and the target
        others = -torch.where(possible, logp, 0.0).sum(-1) - nll  # (n,)
        n_others = possible.sum(-1) - 1  # (n,)
    loss = (1.0 - smoothing) * nll + smoothing * others / n_others
    return loss.sum(), nll.sum().detach(), tgt.numel()


LOSS_CHUNK_LOGITS = 1 << 23  # logits unembedded at a time on the CPU: 32 MB in float32
# on a GPU: as many logits at a time as fit this share of the memory that is free (the
# driver's free memory and what the caching allocator holds unused), at BYTES_PER_LOGIT
# each at the loss's peak (the float32 log-softmax kept for the backward pass, its gradient,
# the gradient's sum and the half-precision logits' gradient)
DEVICE_MEMORY_SHARE = 0.5
BYTES_PER_LOGIT = 16


def loss_chunk_rows(unembed, states: Tensor) -> int:
    """Rows of ``states`` (n, D) unembedded at a time: a fixed bound on the CPU (its memory
    is the host's, shared with everything else); on a GPU, what the free memory holds, so
    that a batch's logits usually fit in one piece (one kernel per operation, no recompute)."""
    per_row = unembed.out_features
    if states.device.type != "cuda":
        return max(LOSS_CHUNK_LOGITS // per_row, 1)
    free, _ = torch.cuda.mem_get_info(states.device)
    cached = torch.cuda.memory_reserved(states.device) - torch.cuda.memory_allocated(states.device)
    budget = DEVICE_MEMORY_SHARE * (free + cached)
    return max(int(budget // (per_row * BYTES_PER_LOGIT)), 1)


def unembedded_loss(
    unembed, states: Tensor, target: Tensor, smoothing: float, pad_id: int, nll_fn=None
) -> tuple[Tensor, Tensor, int]:
    """``label_smoothed_nll`` of ``unembed(states)``, ``loss_chunk_rows`` rows at a time.

    The logits of a batch are its largest tensors (n x V: 3,600 targets x 37,000 classes are
    530 MB in float32, and the softmax, its gradient and the logits' gradient as much again),
    so on the CPU the rows are unembedded in chunks of ``LOSS_CHUNK_LOGITS`` logits, and in
    training each chunk runs under ``torch.utils.checkpoint``: its logits are recomputed in
    the backward pass instead of kept, and one chunk's are alive at a time. The loss is the
    same sum, added up in chunks; the price is one more forward pass of the unembedding and a
    few small kernels per chunk. On a GPU the chunk is what a share of the free memory holds:
    a 25k-token batch's logits in one piece on an 80 GB card. ``states`` (n, D), ``target`` (n,).
    ``nll_fn``: ``label_smoothed_nll`` or a compiled copy of it (``aiayn.train.compiling``).
    """
    nll_fn = nll_fn or label_smoothed_nll
    rows = loss_chunk_rows(unembed, states)
    n = states.size(0)
    # without a bias no logit is -inf: no host check of the logits (a sync on a GPU)
    every_class = True if unembed.bias is None else None
    if n <= rows:
        return nll_fn(
            unembed(states), target, smoothing, pad_id, selected=True, every_class=every_class
        )

    def chunk(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        loss, nll, _ = nll_fn(
            unembed(x), y, smoothing, pad_id, selected=True, every_class=every_class
        )
        return loss, nll

    loss = nll = states.new_zeros((), dtype=torch.float32)
    for i in range(0, n, rows):
        x, y = states[i : i + rows], target[i : i + rows]  # (r, D), (r,)
        if torch.is_grad_enabled() and x.requires_grad:
            part, part_nll = checkpoint(chunk, x, y, use_reentrant=False)
        else:
            part, part_nll = chunk(x, y)
        loss, nll = loss + part, nll + part_nll
    return loss, nll.detach(), n


def seq2seq_loss(
    model, batch, smoothing: float, pad_id: int, nll_fn=None
) -> tuple[Tensor, Tensor, int]:
    """Teacher-forced loss of an encoder-decoder on a ``Batch`` (Phuong & Hutter Algorithm 11).

    Targets are padded at the end only (``aiayn.data.batching.pad``), so the decoder's causal
    mask is left to the attention kernel (``padded_right``)."""
    keep = batch.tgt_out != pad_id  # (B, T)
    states = model(batch.src, batch.tgt_in, select=keep, logits=False, padded_right=True)  # (n, D)
    target = batch.tgt_out[keep]  # (n,)
    return unembedded_loss(model.unembed, states, target, smoothing, pad_id, nll_fn)


def causal_lm_loss(
    model, batch, smoothing: float, pad_id: int, nll_fn=None
) -> tuple[Tensor, Tensor, int]:
    """Next-token loss of a decoder-only model (Phuong & Hutter 2022, Algorithm 13); blocks
    padded at the end only, if at all (``padded_right``, as ``seq2seq_loss``)."""
    keep = batch.targets != pad_id  # (B, T)
    states = model(batch.inputs, select=keep, logits=False, padded_right=True)  # (n, D)
    target = batch.targets[keep]  # (n,)
    return unembedded_loss(model.unembed, states, target, smoothing, pad_id, nll_fn)


@torch.no_grad()
def evaluate_loss(
    model, batches, pad_id: int, loss_fn=seq2seq_loss, device=None, autocast=nullcontext
) -> tuple[float, int]:
    """Mean NLL per target token over ``batches`` (eval mode, no smoothing).

    ``device``: where the batches go (default: stay put); ``autocast``: a context factory
    for mixed precision.
    """
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for batch in batches:
        if device is not None:
            batch = batch.to(device)
        with autocast():
            _, nll, n = loss_fn(model, batch, 0.0, pad_id)
        total += float(nll)
        count += n
    model.train(was_training)
    return total / max(count, 1), count


def mask_tokens(
    tokens: Tensor, vocab_size: int, first_regular: int, p: float, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """BERT masking (Phuong & Hutter 2022, Algorithm 12; Devlin et al. 2019).

    Selects each regular token (id >= ``first_regular``: never padding or a special) with
    probability ``p``; of those, 80% become the mask token, 10% a random regular token, 10%
    stay. Returns (inputs, targets) with targets = the original token where selected, else pad.
    """
    from aiayn.data.tokenizer import MASK, PAD

    regular = tokens >= first_regular
    selected = (torch.rand(tokens.shape, generator=generator) < p) & regular
    action = torch.rand(tokens.shape, generator=generator)
    random_tokens = torch.randint(first_regular, vocab_size, tokens.shape, generator=generator)
    inputs = tokens.clone()
    inputs[selected & (action < 0.8)] = MASK
    swap = selected & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_tokens[swap]
    targets = torch.where(selected, tokens, torch.full_like(tokens, PAD))
    return inputs, targets


def mlm_loss(model, batch, smoothing: float, pad_id: int) -> tuple[Tensor, Tensor, int]:
    """Masked-LM loss on the selected positions only (Phuong & Hutter 2022, Algorithm 12)."""
    keep = batch.targets != pad_id  # (B, T): the selected positions
    logits = model(batch.inputs, select=keep)  # (n, V)
    return label_smoothed_nll(logits, batch.targets[keep], smoothing, pad_id, selected=True)


def classification_loss(model, batch, smoothing: float, pad_id: int) -> tuple[Tensor, Tensor, int]:
    """Cross-entropy of the pooled classifier; counts examples, not tokens."""
    logits = model.classify(batch.inputs)  # (B, C)
    loss = F.cross_entropy(
        logits.float(), batch.targets, label_smoothing=smoothing, reduction="sum"
    )
    nll = F.cross_entropy(logits.float(), batch.targets, reduction="sum").detach()
    return loss, nll, batch.targets.numel()


@torch.no_grad()
def accuracy(model, batches, device=None) -> float:
    """Share of examples whose most likely class is the label."""
    was_training = model.training
    model.eval()
    right = total = 0
    for batch in batches:
        if device is not None:
            batch = batch.to(device)
        right += int((model.classify(batch.inputs).argmax(-1) == batch.targets).sum())
        total += batch.targets.numel()
    model.train(was_training)
    return right / max(total, 1)
