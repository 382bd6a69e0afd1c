"""One optimizer step of the training loop, apart from the loop's bookkeeping: the step's
batches split over gradient accumulation and data-parallel ranks (DDP's ``no_sync`` until the
last), mixed precision (autocast and the fp16 grad scaler), clipping, and the guards that stop
a run whose gradients are not finite or whose loss has left the plausible range.

``Steps`` is the trainer's base class (``aiayn.train.loop.Trainer``); it reads the trainer's
``run``, ``ctx``, ``objective``, ``optimizer``, ``scheduler``, ``scaler``, ``model``,
``model_config`` and ``stop``, logs through its ``log``, and a run that diverged sets its
checkpoints aside through ``set_aside_diverged`` (``aiayn.train.bookkeeping``).

The loss of step s is that of the weights step s - 1 wrote: when a run stops for a loss out of
range (or gradients not finite) since step s, the checkpoints from step s - 1 on hold weights
that gave it, and are set aside; the message names the last good checkpoint, the one a run in
the same directory resumes from.
"""

from __future__ import annotations

import math
import time

import torch

from aiayn.data.tokenizer import PAD
from aiayn.train import distributed as ddp
from aiayn.train.prefetch import Ready


class Steps:
    """The optimizer step and its guards (see the module's docstring)."""

    MAX_NONFINITE_IN_A_ROW = 5
    # a loss per token above this many times the uniform distribution's, log(V), plus a margin
    # (a fresh model starts near log(V)), for MAX_DIVERGED_IN_A_ROW steps in a row, or in one
    # validation, is a run that diverged: in bf16, or with clipping, its gradients stay finite
    DIVERGED_TIMES_UNIFORM, DIVERGED_MARGIN = 2.0, 10.0
    MAX_DIVERGED_IN_A_ROW = 5

    def train_step(self, group) -> tuple[float, float, int, float]:
        """One optimizer step over the global ``group`` of batches.

        Rank r computes batches r, r + world_size, ...; the loss is normalised by the target
        tokens of the whole group, and DDP's gradient mean is undone by ``world_size``, so the
        update equals one process computing the whole group. Returns the group's loss and NLL
        per target token, its target tokens and the step's seconds (the same on every rank).
        ``group`` is a sequence of batches, or a ``Ready`` group (a ``Prefetcher`` collated this
        rank's batches and counted the group's target tokens).
        """
        start = time.perf_counter()
        tc, ctx = self.run.train, self.ctx
        if not isinstance(group, Ready):
            group = Ready.of(group, ctx.rank, ctx.world_size)
        n_tokens, mine = group.n_tokens, group.mine
        scale = ctx.world_size / n_tokens
        total = total_nll = torch.zeros((), device=ctx.device)  # summed on the device: no syncs
        for i, batch in enumerate(mine):
            with ddp.no_sync(self.objective, skip=i < len(mine) - 1):
                with ctx.autocast():
                    loss, nll, _ = self.objective(batch.to(ctx.device), tc.label_smoothing, PAD)
                self.scaler.scale(loss * scale).backward()
            total = total + loss.detach().float()
            total_nll = total_nll + nll.detach().float()
        self.scaler.unscale_(self.optimizer)
        max_norm = tc.clip_norm or math.inf
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        # the one host sync of the step: the norm decides the step, the losses are logged
        self.grad_norm, total, total_nll = torch.stack([norm.float(), total, total_nll]).tolist()
        if self.scaler.is_enabled() or math.isfinite(self.grad_norm):
            self.scaler.step(self.optimizer)  # fp16: the scaler skips steps with inf/NaN
            self.scaler.update()
            self.nonfinite_in_a_row = 0
        else:
            self._skip_nonfinite_step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        seconds = time.perf_counter() - start
        if ctx.distributed:  # one all-reduce: the logged losses, a common clock, a stop signal
            stop = float(self.stop.received is not None)
            total, total_nll, seconds, stop = ddp.all_reduce_sum(
                [total, total_nll, seconds, stop], ctx
            )
            seconds /= ctx.world_size
            self.stop_everywhere = stop > 0
        return total / n_tokens, total_nll / n_tokens, n_tokens, seconds

    def loss_ceiling(self) -> float:
        """The highest plausible loss per target (nats): ``DIVERGED_TIMES_UNIFORM`` times the
        uniform distribution's over the model's classes, plus ``DIVERGED_MARGIN``."""
        c = self.model_config
        classes = c.n_classes or c.target_vocab
        return self.DIVERGED_TIMES_UNIFORM * math.log(classes) + self.DIVERGED_MARGIN

    def _check_diverged(self, nll: float, what: str) -> None:
        """Stop the run when ``nll`` (nats per target) has left the plausible range: for
        ``MAX_DIVERGED_IN_A_ROW`` training steps in a row (``what`` "loss", counted in
        ``diverged_in_a_row``), or in one validation ("valid_loss"). ``troubled_since`` is the
        first of the steps in a row whose loss was out of range or whose gradients were not
        finite (0: the last step was fine), ``troubled_by`` what went wrong there."""
        in_range = not math.isfinite(nll) or nll <= self.loss_ceiling()
        if what == "loss":
            self.diverged_in_a_row = 0 if in_range else self.diverged_in_a_row + 1
            if not in_range and not self.troubled_since:
                self.troubled_since, self.troubled_by = self.step, "a loss out of range"
            elif in_range and not self.nonfinite_in_a_row:  # (a NaN loss skipped the step)
                self.troubled_since = 0
        if in_range:
            return
        in_a_row = self.diverged_in_a_row if what == "loss" else 1
        self.log({"event": "diverged", "step": self.step, what: nll})
        if in_a_row < (self.MAX_DIVERGED_IN_A_ROW if what == "loss" else 1):
            return
        kind = "validation" if what == "valid_loss" else "training"
        times = f" for {in_a_row} steps in a row" if what == "loss" else ""
        ceiling = self.loss_ceiling()
        uniform = (ceiling - self.DIVERGED_MARGIN) / self.DIVERGED_TIMES_UNIFORM
        # a training loss is that of the weights the step before wrote; a validation's, this one's
        if self.troubled_since:
            checkpoints = self.set_aside_diverged(self.troubled_since - 1, self.troubled_by)
        else:
            checkpoints = self.set_aside_diverged(self.step, "a validation loss out of range")
        raise FloatingPointError(
            f"step {self.step}: the {kind} loss is {nll:.4g} nats per target{times}, above any "
            f"plausible value ({ceiling:.1f}; guessing uniformly gives {uniform:.1f}): the run "
            f"diverged and stops. {checkpoints} {self._advice(nonfinite=False)}"
        )

    def _advice(self, nonfinite: bool) -> str:
        """What to change before running again: only settings that would change something
        (clipping when the run does not clip, fp32 when it does not train in fp32)."""
        tc = self.run.train
        fixes = ["lower train.lr_scale", "raise train.warmup"]
        if not tc.clip_norm:
            fixes.append("set train.clip_norm")
        if nonfinite and self.ctx.precision != "fp32":
            fixes.append('set train.precision = "fp32"')
        listed = ", ".join(fixes[:-1]) + f" or {fixes[-1]}"
        return f"To go on, {listed}, and run again in {self.out_dir}."

    def _skip_nonfinite_step(self) -> None:
        """Gradients with inf or NaN (identical on every rank after the all-reduce): leave
        the weights and optimizer state as they are, log it, and give up after a few in a row
        rather than train on garbage."""
        self.nonfinite_in_a_row += 1
        if not self.troubled_since:
            self.troubled_since, self.troubled_by = self.step + 1, "inf or NaN gradients"
        self.log({"event": "skipped_step", "step": self.step + 1, "reason": "non-finite gradients"})
        if self.nonfinite_in_a_row >= self.MAX_NONFINITE_IN_A_ROW:
            checkpoints = self.set_aside_diverged(self.troubled_since - 1, self.troubled_by)
            raise FloatingPointError(
                f"step {self.step + 1}: gradients were inf or NaN for {self.nonfinite_in_a_row} "
                f"steps in a row; the run stops. {checkpoints} {self._advice(nonfinite=True)}"
            )

    def _groups(self, batches: list) -> list[list]:
        """The epoch's global batches, ``accum_steps * world_size`` batches a step; with
        several processes a last incomplete group is dropped, so every rank has work."""
        size = self.run.train.accum_steps * self.ctx.world_size
        groups = [batches[i : i + size] for i in range(0, len(batches), size)]
        if self.ctx.distributed and groups and len(groups[-1]) < size:
            groups.pop()
        return groups
