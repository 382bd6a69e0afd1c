"""Training losses. Models return logits; every loss lives here."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int
) -> tuple[Tensor, Tensor, int]:
    """Summed label-smoothed cross-entropy over non-pad targets (Vaswani et al. 2017 §5.4).

    The target distribution puts 1 - smoothing on the reference token and spreads
    ``smoothing`` evenly over the other classes except padding; padding positions and the pad
    class get nothing. Returns (smoothed loss sum, plain NLL sum, number of target tokens).
    ``logits`` (N, V), ``target`` (N,).
    """
    logits = logits.reshape(-1, logits.size(-1))  # (N, V)
    target = target.reshape(-1)  # (N,)
    keep = target != pad_id  # (N,)
    logp = F.log_softmax(logits[keep].float(), dim=-1)  # (n, V)
    tgt = target[keep]
    nll = -logp.gather(1, tgt[:, None]).squeeze(1)  # (n,)
    if smoothing > 0.0:
        others = -(logp.sum(-1) - logp[:, pad_id]) - nll  # -sum log p over non-pad, non-target
        loss = (1.0 - smoothing) * nll + smoothing / (logits.size(-1) - 2) * others
    else:
        loss = nll
    return loss.sum(), nll.sum().detach(), int(keep.sum())


def seq2seq_loss(model, batch, smoothing: float, pad_id: int) -> tuple[Tensor, Tensor, int]:
    """Teacher-forced loss of an encoder-decoder on a ``Batch`` (Phuong & Hutter Algorithm 11)."""
    logits = model(batch.src, batch.tgt_in)  # (B, T, V)
    return label_smoothed_nll(logits, batch.tgt_out, smoothing, pad_id)


def causal_lm_loss(model, batch, smoothing: float, pad_id: int) -> tuple[Tensor, Tensor, int]:
    """Next-token loss of a decoder-only model (Phuong & Hutter 2022, Algorithm 13)."""
    logits = model(batch.inputs)  # (B, T, V)
    return label_smoothed_nll(logits, batch.targets, smoothing, pad_id)


@torch.no_grad()
def evaluate_loss(model, batches, pad_id: int, loss_fn=seq2seq_loss) -> tuple[float, int]:
    """Mean NLL per target token over ``batches`` (eval mode, no smoothing)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for batch in batches:
        _, nll, n = loss_fn(model, batch, 0.0, pad_id)
        total += float(nll)
        count += n
    model.train(was_training)
    return total / max(count, 1), count
