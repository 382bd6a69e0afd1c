"""The training loop (Phuong & Hutter 2022, Algorithm 11; Vaswani et al. 2017 §5).

One loop for every run: token batches grouped by length, gradient accumulation, clipping,
the warmup schedule, validation with keep-best, atomic checkpoints with exact resume, JSON-lines
metrics, a progress bar and the curves at the end. On a GPU with mixed precision, and as several
data-parallel processes under ``torchrun`` (see ``aiayn.train.distributed``): then every
optimizer step takes ``accum_steps * world_size`` batches, rank r computing every
``world_size``-th of them, and only rank 0 writes to the run directory.

Run directory layout::

    run.json            the full run config
    train.lock          pid and host of the training that runs in it (see ``rundir``)
    tokenizer.model     trained once at the start, reused on resume
    store/              the splits encoded once (token stores), reused on resume and by
                        every process; written again if the tokenizer or a corpus file changes
    checkpoints/        checkpoint-STEP.pt, the last K
    metrics.jsonl       one JSON object per log line / validation
    tensorboard/        the same numbers as TensorBoard event files (train.tensorboard)
    best/               model directory with the best validation loss (or accuracy)
    model/              the final model directory (averaged when train.average_last > 0)
    curves.png          loss and learning-rate curves
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from aiayn.config import ModelConfig, RunConfig
from aiayn.data.store import remove_partial_writes
from aiayn.data.tokenizer import (
    PAD,
    has_tokenizer,
    load_tokenizer,
    tokenizer_file,
    tokenizer_sha256,
)
from aiayn.errors import TrainingInterrupted, UserError
from aiayn.fileio import write_json
from aiayn.model import build_model
from aiayn.model.stacks import set_activation_checkpointing
from aiayn.modeldir import save_model_dir
from aiayn.train import checkpoint as ckpt
from aiayn.train import compiling, resume
from aiayn.train import distributed as ddp
from aiayn.train.heap import HeapTrimmer
from aiayn.train.objectives import accuracy, evaluate_loss
from aiayn.train.optim import build_optimizer, schedule_steps
from aiayn.train.prefetch import Prefetcher, Ready
from aiayn.train.rundir import (
    RunLock,
    StopSignals,
    check_run_directory,
    remove_temp_files,
    repair_metrics,
)
from aiayn.train.tasks import StoreAccess, make_task

STORE_DIR = "store"  # the token stores of the run's splits (aiayn.data.store)


def save_trained_model(
    directory: Path, model, tokenizer, run: RunConfig, dtype=None, extra=None
) -> None:
    """A self-contained model directory: weights, config, tokenizer and the run config."""
    directory = Path(directory)
    save_model_dir(directory, model, dtype=dtype)
    tokenizer.save(directory)
    write_json(directory / "run.json", {**run.to_dict(), **(extra or {})})


class Trainer:
    """Trains the model of ``run``'s task into ``out_dir``; resumable."""

    def __init__(
        self, run: RunConfig, out_dir: Path, progress: bool = True, data_only: bool = False
    ) -> None:
        """``data_only``: train the tokenizer and write the token stores, then stop (the
        model is not built): a run's data prepared before its processes start."""
        self.run, self.out_dir, self.progress = run, Path(out_dir), progress
        self.data_only = data_only
        self.ckpt_dir = self.out_dir / "checkpoints"
        self.metrics_path = self.out_dir / "metrics.jsonl"
        tc = run.train
        if tc.tensorboard:
            from aiayn.train.tensorboard import summary_writer

            summary_writer()  # installed, or an error before anything is written
        if tc.threads:
            torch.set_num_threads(tc.threads)
        torch.manual_seed(tc.seed)
        self.was_deterministic = torch.are_deterministic_algorithms_enabled()
        if tc.deterministic:  # cuBLAS needs a fixed workspace for it (CUDA's documentation)
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True)
        self.ctx = ddp.setup(tc.device, tc.precision)
        self.progress = progress and self.ctx.is_main
        self.stop, self.stop_everywhere = StopSignals(), False
        self.lock = RunLock(self.out_dir)
        created = not self.out_dir.exists()
        if self.ctx.is_main:  # before anything is written: one training per directory
            check_run_directory(self.out_dir)
            self.lock.acquire()
        try:
            self._prepare()
        except BaseException:
            self.close()
            if created and self.out_dir.is_dir() and not any(self.out_dir.iterdir()):
                self.out_dir.rmdir()  # leave no empty directory behind a failed start
            raise

    def _prepare(self) -> None:
        run, tc = self.run, self.run.train
        existing = ckpt.list_checkpoints(self.ckpt_dir)
        if self.ctx.is_main:
            remove_temp_files(self.out_dir)  # of writes a killed run left half done
        state = resume.load_last(existing)
        resume.check_same_run(run, self.out_dir, existing, state)
        self.task = make_task(run)
        if run.model.family not in (ModelConfig().family, self.task.family):
            raise UserError(
                f"model.family = {run.model.family!r} does not fit data.task = "
                f"{run.data.task!r}, which trains the {self.task.family} family; leave "
                "model.family out (the task decides it) or change data.task"
            )
        pretrained = load_tokenizer(Path(tc.init_from)) if tc.init_from else None
        if pretrained is not None:
            resume.check_case_folding(run, pretrained, tc.init_from)
        if self.ctx.is_main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            if not existing and has_tokenizer(self.out_dir):
                resume.drop_outdated_tokenizer(run, self.out_dir)
            if not has_tokenizer(self.out_dir):
                tokenizer = pretrained if pretrained is not None else self.task.train_tokenizer()
                tokenizer.save(self.out_dir)
            # the precision train.precision "auto" chose, beside the config
            write_json(
                self.out_dir / "run.json", {**run.to_dict(), "precision": self.ctx.precision}
            )
        ddp.barrier(self.ctx)  # the other ranks read the tokenizer rank 0 wrote
        self.tokenizer = load_tokenizer(self.out_dir)
        self.tokenizer_sha256 = tokenizer_sha256(self.out_dir)

        self.model_config = run.model.replace(
            vocab_size=self.tokenizer.vocab_size,
            pad_id=PAD,
            family=self.task.family,
            **self.task.model_overrides(),
        )
        store_dir = self.out_dir / STORE_DIR
        if self.ctx.is_main:
            remove_partial_writes(store_dir)
        # rank 0 writes the stores the others wait for and map
        access = StoreAccess(store_dir, self.tokenizer_sha256, write=self.ctx.is_main)
        self.task.load(self.tokenizer, access)
        if self.data_only:
            return
        self.valid_batches = list(self.task.valid_batches())
        if not self.valid_batches:
            raise UserError(f"{run.data.corpus}: the valid split is empty; validation needs text")

        self.model = build_model(self.model_config).to(self.ctx.device)
        set_activation_checkpointing(self.model, tc.activation_checkpointing)
        if self.ctx.rank:  # same initial weights everywhere, different dropout masks
            torch.manual_seed(tc.seed + self.ctx.rank)
        loss_fn = self.task.loss_fn
        if tc.compile:  # each layer and the loss, compiled on their first call
            compiling.compile_layers(self.model)
            loss_fn = compiling.compiled_loss(loss_fn)
        self.objective = ddp.wrap(
            ddp.Objective(self.model, loss_fn),
            self.ctx,
            find_unused=bool(self.model_config.n_classes),  # the MLM head idles
        )
        self.scaler = self.ctx.grad_scaler()
        self.optimizer, self.scheduler = build_optimizer(
            self.model, tc, self.model_config.d_model, self._schedule_steps()
        )
        self.step, self.epoch, self.batch_pos = 0, 0, 0
        self.elapsed, self.best_valid = 0.0, math.inf
        self.last_valid = (-1, math.nan)  # (step, loss) of the last validation
        self.grad_norm, self.nonfinite_in_a_row, self.diverged_in_a_row = 0.0, 0, 0
        self.last_good_checkpoint: Path | None = None  # saved while the loss was in range
        self.tensorboard = None
        if tc.tensorboard and self.ctx.is_main:  # from the step after the one resumed
            from aiayn.train.tensorboard import DIRECTORY, TensorBoardLog

            resumed = state["step"] if state is not None else 0
            self.tensorboard = TensorBoardLog(self.out_dir / DIRECTORY, resumed)
        if state is not None:
            self._resume(existing[-1], state)
        else:
            if self.ctx.is_main:  # records of an attempt that saved no checkpoint
                repair_metrics(self.metrics_path, self.step)
            if tc.init_from:
                self._init_from(Path(tc.init_from))

    def close(self) -> None:
        """Give the run directory back (the lock) and the signals their usual handlers."""
        if getattr(self, "tensorboard", None) is not None:
            self.tensorboard.close()
        self.stop.restore()
        self.lock.release()
        torch.use_deterministic_algorithms(self.was_deterministic)  # process-wide: undone

    def _schedule_steps(self) -> int:
        """The run's length in optimizer steps, for the schedules that decay to zero."""
        tc = self.run.train
        if tc.schedule not in ("cosine", "linear") or tc.max_steps:
            return tc.max_steps
        return schedule_steps(tc, len(self._groups(self.task.train_batches(0))))

    def _init_from(self, directory: Path) -> None:
        """Start from the weights of a model directory (fine-tuning, or continuing a model)."""
        fresh = resume.init_from(self.model, self.model_config, directory)
        self.log({"event": "init_from", "model_dir": str(directory), "fresh": fresh})

    def _resume(self, path: Path, state: dict) -> None:
        token_file = tokenizer_file(self.out_dir)
        hint = (
            f"this run's tokenizer, {token_file}, has a vocabulary of "
            f"{self.tokenizer.vocab_size} tokens"
        )
        ckpt.load_model_state(self.model, state.get("model"), path, hint)
        recorded = state.get("tokenizer_sha256")
        if recorded is not None and recorded != self.tokenizer_sha256:
            raise UserError(
                f"{token_file} is not the tokenizer {path.name} was trained with (its SHA-256 "
                "differs); restore the run's own tokenizer, or use a new output directory"
            )
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        per_rank = state.get("rng_ranks") or []
        ok = len(per_rank) == self.ctx.world_size
        ckpt.set_rng_state(per_rank[self.ctx.rank] if ok else state["rng"])
        if "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
        self.step, self.epoch, self.batch_pos = state["step"], state["epoch"], state["batch_pos"]
        self.elapsed, self.best_valid = state["elapsed"], state["best_valid"]
        self.last_good_checkpoint = path  # training went on from it
        if self.ctx.is_main:  # a step replayed from here on is logged once
            repair_metrics(self.metrics_path, self.step)
        self.log({"event": "resume", "step": self.step, "checkpoint": path.name})

    def log(self, record: dict) -> None:
        if not self.ctx.is_main:
            return
        try:
            with open(self.metrics_path, "a") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as e:
            raise UserError(f"cannot write {self.metrics_path}: {e.strerror or e}") from None
        if getattr(self, "tensorboard", None) is not None:
            self.tensorboard.write(record)

    def save_checkpoint(self) -> Path | None:
        rng = ddp.gather(ckpt.rng_state(), self.ctx)  # every rank takes part
        if not self.ctx.is_main:
            return None
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "rng": rng[0],
            "rng_ranks": rng,
            "step": self.step,
            "epoch": self.epoch,
            "batch_pos": self.batch_pos,
            "elapsed": self.elapsed,
            "best_valid": self.best_valid,
            "run": self.run.to_dict(),
            "tokenizer_sha256": self.tokenizer_sha256,
        }
        path = ckpt.save_checkpoint(
            self.ckpt_dir, self.step, state, self.run.train.keep_checkpoints
        )
        if not self.diverged_in_a_row and not self.nonfinite_in_a_row:
            self.last_good_checkpoint = path
        return path

    def _valid_loss(self, model) -> float:
        loss, _ = evaluate_loss(
            model,
            self.valid_batches,
            PAD,
            self.task.loss_fn,
            device=self.ctx.device,
            autocast=self.ctx.autocast,
        )
        return loss

    def validate(self) -> float:
        """Validation loss; every rank computes it (the same number), rank 0 writes."""
        loss = self._valid_loss(self.model)
        self._check_diverged(loss, "valid_loss")
        self.last_valid = (self.step, loss)
        record = {"step": self.step, "epoch": self.epoch, "valid_loss": loss}
        record["valid_ppl"] = math.exp(min(loss, 50.0))
        if self.model_config.n_classes:
            record["valid_accuracy"] = accuracy(self.model, self.valid_batches, self.ctx.device)
        # best/ keeps the lowest loss or, with keep_best = "accuracy", the highest accuracy
        score = -record["valid_accuracy"] if self.run.train.keep_best == "accuracy" else loss
        if score < self.best_valid:
            self.best_valid = score
            record["best"] = True
        if record.get("best") and self.ctx.is_main:
            save_trained_model(
                self.out_dir / "best",
                self.model,
                self.tokenizer,
                self.run,
                extra=self.task.saved_extra(),
            )
        self.log(record)
        return loss

    def _out_of_budget(self) -> bool:
        tc = self.run.train
        return bool(
            (tc.max_steps and self.step >= tc.max_steps)
            or (tc.max_minutes and self.elapsed >= tc.max_minutes * 60)
        )

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

    MAX_NONFINITE_IN_A_ROW = 5
    # a loss per token above this many times the uniform distribution's, log(V), plus a margin
    # (a fresh model starts near log(V)), for MAX_DIVERGED_IN_A_ROW steps in a row, or in one
    # validation, is a run that diverged: in bf16, or with clipping, its gradients stay finite
    DIVERGED_TIMES_UNIFORM, DIVERGED_MARGIN = 2.0, 10.0
    MAX_DIVERGED_IN_A_ROW = 5

    def loss_ceiling(self) -> float:
        """The highest plausible loss per target (nats): ``DIVERGED_TIMES_UNIFORM`` times the
        uniform distribution's over the model's classes, plus ``DIVERGED_MARGIN``."""
        c = self.model_config
        classes = c.n_classes or c.target_vocab
        return self.DIVERGED_TIMES_UNIFORM * math.log(classes) + self.DIVERGED_MARGIN

    def _check_diverged(self, nll: float, what: str) -> None:
        """Stop the run when ``nll`` (nats per target) has left the plausible range: for
        ``MAX_DIVERGED_IN_A_ROW`` training steps in a row (``what`` "loss", counted in
        ``diverged_in_a_row``), or in one validation ("valid_loss")."""
        in_range = not math.isfinite(nll) or nll <= self.loss_ceiling()
        if what == "loss":
            self.diverged_in_a_row = 0 if in_range else self.diverged_in_a_row + 1
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
        raise FloatingPointError(
            f"step {self.step}: the {kind} loss is {nll:.4g} nats per target{times}, above any "
            f"plausible value ({ceiling:.1f}; guessing uniformly gives {uniform:.1f}): the run "
            f"diverged and stops (last good checkpoint: {self.last_good_checkpoint or 'none'}). "
            "Lower train.lr_scale, raise train.warmup, or set train.clip_norm"
        )

    def _skip_nonfinite_step(self) -> None:
        """Gradients with inf or NaN (identical on every rank after the all-reduce): leave
        the weights and optimizer state as they are, log it, and give up after a few in a row
        rather than train on garbage."""
        self.nonfinite_in_a_row += 1
        self.log({"event": "skipped_step", "step": self.step + 1, "reason": "non-finite gradients"})
        if self.nonfinite_in_a_row >= self.MAX_NONFINITE_IN_A_ROW:
            raise FloatingPointError(
                f"step {self.step + 1}: gradients were inf or NaN for {self.nonfinite_in_a_row} "
                f"steps in a row; the run stops (last good checkpoint: "
                f"{self.last_good_checkpoint or 'none'}). Lower train.lr_scale, set "
                "train.clip_norm, or use train.precision=fp32"
            )

    def _groups(self, batches: list) -> list[list]:
        """The epoch's global batches, ``accum_steps * world_size`` batches a step; with
        several processes a last incomplete group is dropped, so every rank has work."""
        size = self.run.train.accum_steps * self.ctx.world_size
        groups = [batches[i : i + size] for i in range(0, len(batches), size)]
        if self.ctx.distributed and groups and len(groups[-1]) < size:
            groups.pop()
        return groups

    def _stop_requested(self) -> bool:
        """SIGINT or SIGTERM arrived (on any rank: they agree through the step's all-reduce)."""
        return self.stop_everywhere if self.ctx.distributed else self.stop.received is not None

    def _interrupted(self, saved: bool) -> None:
        """Save a checkpoint at the current step (unless one was just saved), and stop."""
        if not saved:
            self.save_checkpoint()
        signum = self.stop.received or signal.SIGTERM
        name = signal.Signals(signum).name
        self.log({"event": "interrupted", "step": self.step, "signal": name})
        path = ckpt.checkpoint_path(self.ckpt_dir, self.step)
        raise TrainingInterrupted(f"{name}: stopped at step {self.step}, saved {path}", signum)

    def fit(self) -> dict:
        """Train to the end of the budget; SIGINT / SIGTERM stop it after the current step
        with a checkpoint (``TrainingInterrupted``). The run directory is released after."""
        self.stop.install()
        try:
            with HeapTrimmer(self.run.train.trim_heap_every):
                return self._fit()
        finally:
            self.close()

    def _fit(self) -> dict:
        tc = self.run.train
        why = ddp.precision_reason(tc.precision, self.ctx.device, self.ctx.precision)
        self.log({"event": "precision", "step": self.step, "precision": self.ctx.precision,
                  "why": why})  # fmt: skip
        if self.progress:
            print(f"aiayn train: {self.ctx.precision} ({why})", file=sys.stderr)
        self.model.train()
        stop, compiled_logged = self._out_of_budget(), False
        while self.epoch < tc.max_epochs and not stop:
            groups = self._groups(self.task.train_batches(self.epoch))
            if not groups:
                raise UserError(
                    f"{self.run.data.corpus}: the train split gives no training batch (every "
                    "example was dropped or the split is empty); check data.max_len and the data"
                )
            bar = tqdm(
                total=len(groups),
                initial=self.batch_pos,
                desc=f"epoch {self.epoch + 1}",
                disable=not self.progress,
                dynamic_ncols=True,
                leave=False,
            )
            window = {
                "loss": 0.0,
                "nll": 0.0,
                "tokens": 0,
                "eff": 0.0,
                "n": 0,
                "t": time.perf_counter(),
                "wait": 0.0,
            }
            pin = self.ctx.device.type == "cuda"
            with Prefetcher(
                groups, self.batch_pos, self.ctx.rank, self.ctx.world_size, pin=pin
            ) as ahead:
                for group in ahead:
                    loss, nll, n, seconds = self.train_step(group)
                    self._check_diverged(nll, "loss")
                    if tc.compile and not compiled_logged:
                        compiled_logged = True
                        self._log_compile(seconds)
                    self.elapsed += seconds
                    self.batch_pos += 1
                    window["loss"] += loss * n
                    window["nll"] += nll * n
                    window["tokens"] += n
                    window["eff"] += sum(b.efficiency for b in group.mine) / len(group.mine)
                    window["n"] += 1
                    window["wait"], ahead.wait_s = window["wait"] + ahead.wait_s, 0.0
                    bar.update(1)
                    if self.step % tc.log_every == 0:
                        self._log_window(window, bar)
                    if tc.valid_every and self.step % tc.valid_every == 0:
                        self.validate()
                        self.model.train()
                    if self.step % tc.checkpoint_every == 0:
                        self.save_checkpoint()
                    if self._stop_requested():
                        bar.close()
                        self._interrupted(saved=self.step % tc.checkpoint_every == 0)
                    if self._out_of_budget():
                        stop = True
                        break
            bar.close()
            if not stop:
                self.epoch, self.batch_pos = self.epoch + 1, 0
            if not tc.valid_every or stop:
                self.validate()
                self.model.train()
        self.save_checkpoint()
        return self.finish()

    def _log_compile(self, seconds: float) -> None:
        """The first step of a compiled run: its seconds (mostly compilation), the graphs."""
        graphs = compiling.compiled_graphs()
        self.log({"event": "compile", "step": self.step, "first_step_s": seconds,
                  "compiled_graphs": graphs})  # fmt: skip
        if self.progress:
            print(f"aiayn train: compiled {graphs} graphs in {seconds:.1f} s", file=sys.stderr)

    def _log_window(self, window: dict, bar) -> None:
        now = time.perf_counter()
        tokens = max(window["tokens"], 1)
        record = {
            "step": self.step,
            "epoch": self.epoch,
            "loss": window["loss"] / tokens,
            "nll": window["nll"] / tokens,
            "lr": self.scheduler.get_last_lr()[0],
            "grad_norm": self.grad_norm,  # of the window's last step, before clipping
            "tokens_per_s": tokens / max(now - window["t"], 1e-9),
            "padding_efficiency": window["eff"] / max(window["n"], 1),
            # the share of the window's wall time spent waiting for batches
            "data_wait_share": window["wait"] / max(now - window["t"], 1e-9),
            "elapsed_s": self.elapsed,
        }
        if self.run.train.compile:  # a count that grows after the first steps: recompiling
            record["compiled_graphs"] = compiling.compiled_graphs()
        self.log(record)
        bar.set_postfix(
            loss=f"{record['loss']:.3f}",
            lr=f"{record['lr']:.2e}",
            tok_s=f"{record['tokens_per_s']:.0f}",
        )
        window.update(loss=0.0, nll=0.0, tokens=0, eff=0.0, n=0, t=now, wait=0.0)

    def finish(self) -> dict:
        """Write the final model (averaged if asked), the curves, and return a summary."""
        tc = self.run.train
        model = self.model
        if not self.ctx.is_main:
            return {}
        # the optimizer's state is in the last checkpoint: its memory goes to the averaging
        self.optimizer.state.clear()
        if tc.average_last:
            paths = ckpt.list_checkpoints(self.ckpt_dir)[-tc.average_last :]
            model = build_model(self.model_config).to(self.ctx.device)
            model.load_state_dict(ckpt.average_checkpoints(paths))
        model.eval()
        if not tc.average_last and self.last_valid[0] == self.step:
            valid_loss = self.last_valid[1]  # these very weights were just validated
        else:
            valid_loss = self._valid_loss(model)
        summary = {
            "step": self.step,
            "epoch": self.epoch,
            "train_minutes": self.elapsed / 60,
            "valid_loss": valid_loss,
            "valid_ppl": math.exp(min(valid_loss, 50.0)),
            **(
                {"best_valid_accuracy": -self.best_valid}
                if tc.keep_best == "accuracy"
                else {"best_valid_loss": self.best_valid}
            ),
            "averaged_checkpoints": tc.average_last,
            "parameters": sum(p.numel() for p in model.parameters()),
        }
        if self.model_config.n_classes:
            summary["valid_accuracy"] = accuracy(model, self.valid_batches, self.ctx.device)
        extra = {"summary": summary, "precision": self.ctx.precision, **self.task.saved_extra()}
        save_trained_model(self.out_dir / "model", model, self.tokenizer, self.run, extra=extra)
        self.log({"event": "finish", **summary})
        from aiayn.viz import plot_curves

        plot_curves(self.metrics_path, self.out_dir / "curves.png")
        return summary


def train(run: RunConfig, out_dir: Path, progress: bool = True) -> dict:
    """Train (or resume) the run in ``out_dir`` and return its summary ({} on ranks > 0)."""
    trainer = Trainer(run, out_dir, progress)
    try:
        return trainer.fit()
    finally:
        trainer.close()
        ddp.teardown(trainer.ctx)
