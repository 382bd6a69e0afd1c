"""Adam and the warmup / inverse-square-root learning rate (Vaswani et al. 2017 §5.3), or a
warmup + cosine decay for runs with a fixed number of steps."""

from __future__ import annotations

import math

import torch

from aiayn.config import TrainConfig


def noam_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (§5.3, eq. 3)."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def cosine_lr(step: int, warmup: int, total: int, peak: float) -> float:
    """Linear warmup to ``peak`` at ``warmup``, then half a cosine down to 0 at ``total``
    (for runs with a fixed step budget, such as short language-model runs)."""
    if step <= warmup:
        return peak * step / warmup
    progress = min(1.0, (step - warmup) / max(total - warmup, 1))
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_optimizer(
    model: torch.nn.Module, config: TrainConfig, d_model: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """Adam(beta1, beta2, eps) with the schedule applied per optimizer step."""
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=1.0,  # the scheduler's factor is the learning rate itself
        betas=(config.beta1, config.beta2),
        eps=config.eps,
        weight_decay=config.weight_decay,
    )
    if config.schedule == "inverse_sqrt":

        def factor(i: int) -> float:
            return noam_lr(i + 1, d_model, config.warmup, config.lr_scale)
    elif config.schedule == "cosine":

        def factor(i: int) -> float:
            return cosine_lr(i + 1, config.warmup, config.max_steps, config.lr_scale)
    else:

        def factor(i: int) -> float:
            return config.lr_scale * min(1.0, (i + 1) / config.warmup)

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
