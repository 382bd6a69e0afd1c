"""The training loop (Phuong & Hutter 2022, Algorithm 11; Vaswani et al. 2017 §5).

The trainer sets a run up (its directory, tokenizer, token stores, model, optimizer) and runs the
loop; one optimizer step is ``aiayn.train.step`` and the logs, checkpoints, validation and the
final model are ``aiayn.train.bookkeeping``. One loop for every run: token batches grouped by
length, gradient accumulation, clipping, the warmup schedule, validation with keep-best, atomic
checkpoints with exact resume, JSON-lines metrics, a progress bar and the curves at the end. On a
GPU with mixed precision, and as several data-parallel processes under ``torchrun`` (see
``aiayn.train.distributed``): then every optimizer step takes ``accum_steps * world_size`` batches,
rank r computing every ``world_size``-th of them, and only rank 0 writes to the run directory.

Run directory layout::

    run.json            the full run config
    train.lock          pid and host of the training that runs in it (see ``rundir``)
    tokenizer.model     trained once at the start, reused on resume
    store/              the splits encoded once (token stores), reused on resume and by
                        every process; written again if the tokenizer or a corpus file changes
    checkpoints/        checkpoint-STEP.pt, the last K (checkpoint-STEP.diverged.pt: set aside
                        by a run that diverged, never resumed from; see ``aiayn.train.step``)
    metrics.jsonl       one JSON object per log line / validation
    tensorboard/        the same numbers as TensorBoard event files (train.tensorboard)
    best/               model directory with the best validation loss (or accuracy)
    model/              the final model directory (averaged when train.average_last > 0)
    curves.png          loss and learning-rate curves
"""

from __future__ import annotations

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
from aiayn.data.tokenizer import PAD
from aiayn.errors import TrainingInterrupted, UserError
from aiayn.fileio import write_json
from aiayn.model import build_model
from aiayn.model.stacks import set_activation_checkpointing
from aiayn.modeldir.tokenizer_files import has_tokenizer, load_tokenizer, tokenizer_sha256
from aiayn.train import checkpoint as ckpt
from aiayn.train import compiling, resume
from aiayn.train import distributed as ddp
from aiayn.train.bookkeeping import Bookkeeping
from aiayn.train.heap import HeapTrimmer
from aiayn.train.optim import build_optimizer, schedule_steps
from aiayn.train.prefetch import Prefetcher
from aiayn.train.rundir import (
    RunLock,
    StopSignals,
    check_run_directory,
    remove_temp_files,
    repair_metrics,
)
from aiayn.train.step import Steps
from aiayn.train.tasks import StoreAccess, make_task

STORE_DIR = "store"  # the token stores of the run's splits (aiayn.data.store)


class Trainer(Steps, Bookkeeping):
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
        self.elapsed = 0.0  # training seconds: the max_minutes budget's clock
        self.optimizer, self.scheduler = build_optimizer(
            self.model,
            tc,
            self.model_config.d_model,
            self._schedule_steps(),
            spent_s=lambda: self.elapsed,  # a max_minutes budget's decay follows the pace
        )
        self.step, self.epoch, self.batch_pos = 0, 0, 0
        self.best_valid = math.inf
        self.last_valid = (-1, math.nan)  # (step, loss) of the last validation
        self.grad_norm, self.nonfinite_in_a_row, self.diverged_in_a_row = 0.0, 0, 0
        # the first of the steps in a row whose loss was out of range or that were skipped
        self.troubled_since, self.troubled_by = 0, ""
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
        if self.ctx.is_main:  # the checkpoints of an attempt that diverged after this start
            self.drop_diverged(self.step)

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

    def _out_of_budget(self) -> bool:
        tc = self.run.train
        return bool(
            (tc.max_steps and self.step >= tc.max_steps)
            or (tc.max_minutes and self.elapsed >= tc.max_minutes * 60)
        )

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


def train(run: RunConfig, out_dir: Path, progress: bool = True) -> dict:
    """Train (or resume) the run in ``out_dir`` and return its summary ({} on ranks > 0)."""
    trainer = Trainer(run, out_dir, progress)
    try:
        return trainer.fit()
    finally:
        trainer.close()
        ddp.teardown(trainer.ctx)
