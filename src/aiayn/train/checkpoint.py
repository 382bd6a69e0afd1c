"""Training checkpoints: atomic writes, the last K kept, exact resume, and averaging.

A checkpoint holds everything needed to continue bit for bit: model, optimizer, scheduler,
the RNG states and the data position. Checkpoint averaging follows Vaswani et al. 2017 §6.1
(the base model averages the last 5 checkpoints).

A checkpoint whose weights gave a loss out of the plausible range (a run that diverged) is
renamed ``checkpoint-STEP.diverged.pt`` (``mark_diverged``): ``list_checkpoints`` leaves it
out, so a resume never picks it and averaging takes it only when asked (``list_diverged``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

from aiayn.config import RunConfig
from aiayn.errors import UserError
from aiayn.fileio import atomic_write

_NAME = re.compile(r"^checkpoint-(\d+)\.pt$")
_DIVERGED_NAME = re.compile(r"^checkpoint-(\d+)\.diverged\.pt$")
DIVERGED_SUFFIX = ".diverged.pt"  # checkpoint-STEP.diverged.pt: saved while diverging


def checkpoint_path(directory: Path, step: int) -> Path:
    return Path(directory) / f"checkpoint-{step:08d}.pt"


def checkpoint_step(path: Path) -> int:
    """The step a checkpoint file (``checkpoint_path``, or one marked diverged) was written at."""
    name = Path(path).name
    return int((_NAME.match(name) or _DIVERGED_NAME.match(name)).group(1))


def _listed(directory: Path, pattern: re.Pattern) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if pattern.match(p.name)]
    return sorted(found, key=checkpoint_step)


def list_checkpoints(directory: Path) -> list[Path]:
    """Complete checkpoints in ``directory``, oldest first (temporary files and checkpoints
    marked diverged are left out)."""
    return _listed(directory, _NAME)


def list_diverged(directory: Path) -> list[Path]:
    """The checkpoints in ``directory`` marked diverged (``mark_diverged``), oldest first."""
    return _listed(directory, _DIVERGED_NAME)


def mark_diverged(directory: Path, from_step: int) -> list[Path]:
    """Rename every checkpoint of ``directory`` written at ``from_step`` or later to
    checkpoint-STEP.diverged.pt (its weights gave a loss out of range); returns the new paths."""
    marked = []
    for path in list_checkpoints(directory):
        if checkpoint_step(path) >= from_step:
            target = path.with_name(path.name.removesuffix(".pt") + DIVERGED_SUFFIX)
            path.replace(target)
            marked.append(target)
    return marked


def remove_diverged(directory: Path, after_step: int) -> list[Path]:
    """Delete the checkpoints marked diverged that were written after ``after_step`` (a run
    resumed from there writes those steps again); returns the paths removed."""
    removed = [p for p in list_diverged(directory) if checkpoint_step(p) > after_step]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def rng_state() -> dict:
    """The random generators' states: torch's CPU generator, Python's, numpy's and, where
    CUDA is in use, the current GPU's (dropout on a GPU draws from it)."""
    state = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _save(state: dict, path: Path) -> None:
    with open(path, "wb") as f:  # through a Python file, a failed write keeps its OSError
        torch.save(state, f)


def save_checkpoint(directory: Path, step: int, state: dict, keep: int) -> Path:
    """Write ``state`` atomically as checkpoint-STEP.pt, then delete all but the last ``keep``."""
    path = checkpoint_path(directory, step)
    atomic_write(path, lambda p: _save(state, p))
    if keep > 0:
        for old in list_checkpoints(directory)[:-keep]:
            old.unlink(missing_ok=True)
    return path


def load_checkpoint(path: Path, mmap: bool = False) -> dict:
    """A training checkpoint's state; with ``mmap`` its tensors are read from the file only
    when used (torch.load's ``mmap``)."""
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)
    except Exception as e:  # torch raises several types for a damaged file
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise UserError(f"{path}: unreadable checkpoint ({type(e).__name__}: {first})") from None
    if not isinstance(state, dict):
        raise UserError(f"{path}: not a training checkpoint of aiayn")
    return state


def run_config_of(state: dict, path: Path) -> RunConfig:
    """The run config a checkpoint was trained with."""
    try:
        return RunConfig.from_dict(state["run"])
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(
            f"{path}: the checkpoint's run config is missing or invalid ({e})"
        ) from None


def load_model_state(model, state: dict, path: Path, hint: str = "") -> None:
    """``model.load_state_dict(state)``, after checking that every tensor fits: a mismatch is a
    ``UserError`` naming the checkpoint, the tensors and ``hint`` (what the model was built from)
    instead of torch's list of every tensor."""
    if not isinstance(state, dict):
        raise UserError(f"{path}: not a training checkpoint of aiayn (no model state)")
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = [
        f"{k} is {tuple(state[k].shape)} there, {tuple(v.shape)} here"
        for k, v in expected.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    if missing or unexpected or wrong:
        parts = wrong[:3]
        if missing:
            parts.append(f"missing {', '.join(missing[:3])}{'...' if len(missing) > 3 else ''}")
        if unexpected:
            more = "..." if len(unexpected) > 3 else ""
            parts.append(f"unexpected {', '.join(unexpected[:3])}{more}")
        raise UserError(
            f"{path} does not fit this model: {'; '.join(parts)}" + (f" ({hint})" if hint else "")
        )
    model.load_state_dict(state)


def average_state_dicts(
    states: Iterable[dict[str, torch.Tensor]], names: list[str] | None = None
) -> dict[str, torch.Tensor]:
    """Element-wise mean of model state dicts with the same keys (floating tensors only).

    The states are summed in float64 one after the other, so an iterator of them holds one
    state at a time beside the sums (five checkpoints of a large model need not fit at once).
    """
    sums: dict[str, torch.Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}  # the mean takes the first state's dtypes
    count = 0
    first = ""
    for state in states:  # (enumerate's cached tuple would keep the last state alive)
        name = names[count] if names else f"checkpoint {count}"
        if not count:
            first = name
            dtypes = {k: v.dtype for k, v in state.items()}
            sums = {
                k: torch.zeros_like(v, dtype=torch.float64) if v.is_floating_point() else v.clone()
                for k, v in state.items()
            }
        elif set(state) != set(sums) or any(state[k].shape != sums[k].shape for k in sums):
            raise UserError(
                f"{name} has other parameters than {first}: they are checkpoints of "
                "different models and cannot be averaged"
            )
        for k, t in sums.items():
            if t.is_floating_point():
                t += state[k].double()
        count += 1
        del state  # before the iterator reads the next one
    if not count:
        raise UserError("no checkpoints to average")
    return {
        k: (v / count).to(dtypes[k]) if dtypes[k].is_floating_point else v for k, v in sums.items()
    }


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Mean of the model weights stored in the training checkpoints ``paths``, read one at a
    time and memory-mapped: of each, only the model's weights are read, not the optimizer's."""

    def states():
        for path in paths:
            state = load_checkpoint(path, mmap=True).get("model")
            if not isinstance(state, dict):
                raise UserError(f"{path}: not a training checkpoint of aiayn (no model state)")
            yield state

    return average_state_dicts(states(), [str(p) for p in paths])
