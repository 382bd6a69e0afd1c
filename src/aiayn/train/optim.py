"""Adam and the warmup / inverse-square-root learning rate (Vaswani et al. 2017 §5.3), or a
warmup followed by a cosine or linear decay to zero at the run's end: a known number of
steps, or the step at which a time budget (``train.max_minutes``) runs out, estimated as the
run goes from the training time it has spent; optional decoupled weight decay (AdamW,
Loshchilov & Hutter 2019)."""

from __future__ import annotations

import math
from collections.abc import Callable

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


def linear_lr(step: int, warmup: int, total: int, peak: float) -> float:
    """Linear warmup to ``peak`` at ``warmup``, then a straight line down to 0 at ``total``
    (the usual recipe for fine-tuning a pretrained encoder, Devlin et al. 2019 §A.2)."""
    if step <= warmup:
        return peak * step / warmup
    return peak * max(0.0, (total - step) / max(total - warmup, 1))


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's parameter groups: weight matrices and embeddings (2-D and up) decay; biases and
    LayerNorm gains and shifts (1-D) do not, as in BERT's recipe. One group without decay."""
    if not weight_decay:
        return [{"params": list(model.parameters())}]
    params = list(model.parameters())  # a tied matrix appears once
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def fused_adam(groups: list[dict]) -> bool | None:
    """Whether Adam runs as one fused kernel over all parameters: on a GPU (every parameter
    on CUDA), where it replaces the per-tensor kernels of the default implementation; on the
    CPU, torch's default (None)."""
    params = [p for g in groups for p in g["params"]]
    return True if params and all(p.is_cuda for p in params) else None


def schedule_steps(config: TrainConfig, steps_per_epoch: int) -> int:
    """The optimizer steps a decaying schedule spans: ``max_steps`` when set, else the steps of
    ``max_epochs`` epochs (a ``max_minutes`` budget can end the run before either)."""
    return config.max_steps or config.max_epochs * steps_per_epoch


def budget_steps(step: int, total_steps: int, seconds: float, budget_s: float) -> int:
    """The step a run ends at: ``total_steps``, or sooner the step at which a training-time
    budget of ``budget_s`` seconds runs out, at the pace of the ``step`` steps that took
    ``seconds`` (no estimate before any time is spent, or without a budget)."""
    if budget_s <= 0 or seconds <= 0 or step < 1:
        return total_steps
    return min(total_steps, max(step, round(step * budget_s / seconds)))


def build_optimizer(
    model: torch.nn.Module,
    config: TrainConfig,
    d_model: int,
    total_steps: int = 0,
    spent_s: Callable[[], float] | None = None,
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW(beta1, beta2, eps, weight_decay) with the schedule applied per optimizer step.

    With ``weight_decay`` 0 (the default) this is the paper's Adam (fused on a GPU, see
    ``fused_adam``). The decay is decoupled and scaled by the scheduled learning rate
    (torch's AdamW: ``p -= lr * wd * p``).
    ``total_steps`` is where the cosine and linear schedules reach 0 (see ``schedule_steps``);
    with ``train.max_minutes`` and ``spent_s`` (the training seconds the budget has counted:
    the steps before the one the scheduler steps after, as the loop adds a step's seconds
    once it is over), where the budget runs out first (``budget_steps``), so that a fast
    host decays over its many steps and a slow one over its few. Such a schedule follows the
    host's pace: two runs of one config end at the same learning rate, not the same steps.
    """
    groups = parameter_groups(model, config.weight_decay)
    optimizer = torch.optim.AdamW(
        groups,
        lr=1.0,  # the scheduler's factor is the learning rate itself
        betas=(config.beta1, config.beta2),
        eps=config.eps,
        weight_decay=0.0,
        fused=fused_adam(groups),
    )
    decaying = {"cosine": cosine_lr, "linear": linear_lr}
    if config.schedule in decaying and total_steps < 1:
        raise ValueError(f"train.schedule={config.schedule} needs the run's length in steps")
    if config.schedule == "inverse_sqrt":

        def factor(i: int) -> float:
            return noam_lr(i + 1, d_model, config.warmup, config.lr_scale)
    elif config.schedule in decaying:
        decay = decaying[config.schedule]
        budget_s = config.max_minutes * 60 if spent_s is not None else 0.0

        def factor(i: int) -> float:  # after step i; the clock has counted the steps before it
            end = budget_steps(i - 1, total_steps, spent_s() if budget_s else 0.0, budget_s)
            return decay(i + 1, config.warmup, end, config.lr_scale)
    else:

        def factor(i: int) -> float:
            return config.lr_scale * min(1.0, (i + 1) / config.warmup)

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
