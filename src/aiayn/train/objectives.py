"""Training losses. Models return logits; every loss lives here."""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint


def label_smoothed_nll(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int, selected: bool = False
) -> tuple[Tensor, Tensor, int]:
    """Summed label-smoothed cross-entropy over non-pad targets (Vaswani et al. 2017 §5.4).

    The target distribution puts 1 - smoothing on the reference token and spreads
    ``smoothing`` evenly over the other classes except padding and the ids the model cannot
    produce (logit -inf, e.g. a ``final_logits_bias`` of -inf); padding positions get nothing.
    Returns (smoothed loss sum, plain NLL sum, number of target tokens).
    ``logits`` (N, V), ``target`` (N,); ``selected``: the caller has already dropped the
    padding positions (the model unembedded only real targets).
    """
    logits = logits.reshape(-1, logits.size(-1))  # (N, V)
    tgt = target.reshape(-1)  # (N,)
    if not selected:
        keep = tgt != pad_id  # (N,)
        logits, tgt = logits[keep], tgt[keep]  # (n, V), (n,)
    logp = F.log_softmax(logits.float(), dim=-1)  # (n, V)
    nll = -logp.gather(1, tgt[:, None]).squeeze(1)  # (n,)
    if smoothing <= 0.0:
        return nll.sum(), nll.sum().detach(), tgt.numel()
    total = logp.sum(-1) if logp.device.type == "cpu" else None  # (n,)
    if total is not None and bool(torch.isfinite(total).all()):
        # every class possible (the common case): the sum over the classes other than pad
        # and the target is the row sum less those two, with no (n, V) mask; the host check
        # costs nothing on the CPU (elsewhere it would be a sync per step)
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


LOSS_CHUNK_LOGITS = 1 << 23  # logits unembedded at a time: 32 MB in float32


def unembedded_loss(
    unembed, states: Tensor, target: Tensor, smoothing: float, pad_id: int
) -> tuple[Tensor, Tensor, int]:
    """``label_smoothed_nll`` of ``unembed(states)``, ``LOSS_CHUNK_LOGITS`` logits at a time.

    The logits of a batch are its largest tensors (n x V: 3,600 targets x 37,000 classes are
    530 MB in float32, and the softmax, its gradient and the logits' gradient as much again),
    so the rows are unembedded in chunks, and in training each chunk runs under
    ``torch.utils.checkpoint``: its logits are recomputed in the backward pass instead of
    kept, and one chunk's are alive at a time. The loss is the same sum, added up in chunks;
    the price is one more forward pass of the unembedding. ``states`` (n, D), ``target`` (n,).
    """
    rows = max(LOSS_CHUNK_LOGITS // unembed.out_features, 1)
    n = states.size(0)
    if n <= rows:
        return label_smoothed_nll(unembed(states), target, smoothing, pad_id, selected=True)

    def chunk(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        loss, nll, _ = label_smoothed_nll(unembed(x), y, smoothing, pad_id, selected=True)
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


def seq2seq_loss(model, batch, smoothing: float, pad_id: int) -> tuple[Tensor, Tensor, int]:
    """Teacher-forced loss of an encoder-decoder on a ``Batch`` (Phuong & Hutter Algorithm 11)."""
    keep = batch.tgt_out != pad_id  # (B, T)
    states = model(batch.src, batch.tgt_in, select=keep, logits=False)  # (n, D)
    return unembedded_loss(model.unembed, states, batch.tgt_out[keep], smoothing, pad_id)


def causal_lm_loss(model, batch, smoothing: float, pad_id: int) -> tuple[Tensor, Tensor, int]:
    """Next-token loss of a decoder-only model (Phuong & Hutter 2022, Algorithm 13)."""
    keep = batch.targets != pad_id  # (B, T)
    states = model(batch.inputs, select=keep, logits=False)  # (n, D)
    return unembedded_loss(model.unembed, states, batch.targets[keep], smoothing, pad_id)


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
