"""The training loop's bookkeeping: the metrics log, checkpoints (written, and read back to
resume exactly), validation with keep-best (``best/``), the logged windows of steps, and the
final model directory (``model/``, averaged when asked) with the run's summary.

``Bookkeeping`` is the trainer's base class (``aiayn.train.loop.Trainer``); it reads the
trainer's state (``run``, ``ctx``, ``model``, ``optimizer``, ``scheduler``, ``step``, ...).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from aiayn.data.tokenizer import PAD
from aiayn.errors import UserError
from aiayn.model import build_model
from aiayn.modeldir import provenance, save_trained_model
from aiayn.modeldir.tokenizer_files import tokenizer_file
from aiayn.train import checkpoint as ckpt
from aiayn.train import compiling
from aiayn.train import distributed as ddp
from aiayn.train.objectives import accuracy, evaluate_loss
from aiayn.train.rundir import repair_metrics


class Bookkeeping:
    """Logging, checkpoints, validation and the final model (see the module's docstring)."""

    # the train settings the learning rate schedule is made of
    SCHEDULE_KEYS = ("lr_scale", "warmup", "schedule", "max_steps", "max_epochs", "max_minutes")

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
        # while the loss is out of range (or the gradients are not finite), older checkpoints
        # are kept: the last good one must outlive those saved since (``set_aside_diverged``).
        # Otherwise one more than keep_checkpoints: the newest is not known good until the
        # next step's loss (its weights') is in range, so the one before it stays till then.
        keep = 0 if self.troubled_since else self.run.train.keep_checkpoints + 1
        return ckpt.save_checkpoint(self.ckpt_dir, self.step, state, keep)

    def set_aside_diverged(self, first_bad: int, gave: str) -> str:
        """The run stops: the weights of step ``first_bad`` on gave ``gave`` ("a loss out of
        range"). The checkpoints from that step on are renamed checkpoint-STEP.diverged.pt
        (``checkpoint.mark_diverged``) and logged; returns the sentence that names the last
        good checkpoint, the one the next run here resumes from."""
        marked = []
        if self.ctx.is_main:
            marked = ckpt.mark_diverged(self.ckpt_dir, first_bad)
            self.log({"event": "set_aside", "step": self.step, "from_step": first_bad,
                      "checkpoints": [p.name for p in marked]})  # fmt: skip
        good = ckpt.list_checkpoints(self.ckpt_dir)
        if good:
            last = (
                f"Last good checkpoint: {good[-1]} (the next run in {self.out_dir} resumes from it)"
            )
        else:
            last = (
                f"Last good checkpoint: none (none was saved before step {first_bad}; the next "
                f"run in {self.out_dir} starts afresh)"
            )
        if not marked:
            return last + "."
        names = ", ".join(ckpt.checkpoint_path(self.ckpt_dir, ckpt.checkpoint_step(p)).name
                          for p in marked)  # fmt: skip
        return (
            f"{last}; set aside as *{ckpt.DIVERGED_SUFFIX} (never resumed from; the next run "
            f"removes them): {names} (from step {first_bad} on, the weights gave {gave})."
        )

    def drop_diverged(self, resumed: int) -> None:
        """A run (re)started at step ``resumed`` (0: afresh) writes the later steps again: the
        checkpoints set aside after it, of the attempt that diverged, are removed, and said so."""
        removed = ckpt.remove_diverged(self.ckpt_dir, resumed)
        if not removed:
            return
        names = [p.name for p in removed]
        self.log({"event": "removed_diverged", "step": resumed, "checkpoints": names})
        start = (
            f"resuming from {ckpt.checkpoint_path(self.ckpt_dir, resumed)}, the last good "
            "checkpoint"
            if resumed
            else f"starting afresh in {self.out_dir} (no good checkpoint)"
        )
        print(
            f"aiayn train: {start}; removed the checkpoints the run that diverged set aside: "
            f"{', '.join(names)}",
            file=sys.stderr,
        )

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
        self._follow_changed_schedule(state)
        if self.ctx.is_main:  # a step replayed from here on is logged once
            repair_metrics(self.metrics_path, self.step)
        self.log({"event": "resume", "step": self.step, "checkpoint": path.name})

    def _follow_changed_schedule(self, state: dict) -> None:
        """A run resumed with another schedule (a lower ``train.lr_scale`` after it diverged,
        say) takes its next step at the new schedule's rate, not at the rate the checkpoint's
        optimizer saved; with the schedule unchanged the saved rate stands (bit for bit)."""
        saved = (state.get("run") or {}).get("train") or {}
        tc = self.run.train
        if all(saved.get(k, getattr(tc, k)) == getattr(tc, k) for k in self.SCHEDULE_KEYS):
            return
        sched = self.scheduler
        for group, base, factor in zip(
            self.optimizer.param_groups, sched.base_lrs, sched.lr_lambdas, strict=True
        ):
            group["lr"] = base * factor(sched.last_epoch)

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
            scores = {k: record[k] for k in ("valid_loss", "valid_accuracy") if k in record}
            weights = provenance.best_weights(self.step, **scores)
            save_trained_model(
                self.out_dir / "best",
                self.model,
                self.tokenizer,
                self.run,
                extra={provenance.KEY: weights, **self.task.saved_extra()},
            )
        self.log(record)
        return loss

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
        record = provenance.last_weights(self.step)
        if tc.average_last:
            paths = ckpt.list_checkpoints(self.ckpt_dir)[-tc.average_last :]
            model = build_model(self.model_config).to(self.ctx.device)
            model.load_state_dict(ckpt.average_checkpoints(paths))
            record = provenance.averaged_weights([(p.name, ckpt.checkpoint_step(p)) for p in paths])
        weights = provenance.describe({provenance.KEY: record})
        if tc.average_last:
            weights += f", the last ones, as train.average_last = {tc.average_last} asks"
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
            "weights": weights,  # what model/ holds
            "parameters": sum(p.numel() for p in model.parameters()),
        }
        if self.model_config.n_classes:
            summary["valid_accuracy"] = accuracy(model, self.valid_batches, self.ctx.device)
        extra = {
            "summary": summary,
            provenance.KEY: record,
            "precision": self.ctx.precision,
            **self.task.saved_extra(),
        }
        save_trained_model(self.out_dir / "model", model, self.tokenizer, self.run, extra=extra)
        self.log({"event": "finish", **summary})
        from aiayn.viz import plot_curves

        plot_curves(self.metrics_path, self.out_dir / "curves.png")
        return summary
