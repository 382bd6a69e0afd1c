"""Training checkpoints: atomic writes, the last K kept, exact resume, and averaging.

A checkpoint holds everything needed to continue bit for bit: model, optimizer, scheduler,
the RNG states and the data position. Checkpoint averaging follows Vaswani et al. 2017 §6.1
(the base model averages the last 5 checkpoints).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import torch

from aiayn.modeldir import atomic_write

_NAME = re.compile(r"^checkpoint-(\d+)\.pt$")


def checkpoint_path(directory: Path, step: int) -> Path:
    return Path(directory) / f"checkpoint-{step:08d}.pt"


def list_checkpoints(directory: Path) -> list[Path]:
    """Complete checkpoints in ``directory``, oldest first (temporary files are ignored)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def rng_state() -> dict:
    return {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])


def save_checkpoint(directory: Path, step: int, state: dict, keep: int) -> Path:
    """Write ``state`` atomically as checkpoint-STEP.pt, then delete all but the last ``keep``."""
    path = checkpoint_path(directory, step)
    atomic_write(path, lambda p: torch.save(state, p))
    if keep > 0:
        for old in list_checkpoints(directory)[:-keep]:
            old.unlink(missing_ok=True)
    return path


def load_checkpoint(path: Path) -> dict:
    path = Path(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # torch raises several types for a damaged file
        raise ValueError(f"{path}: unreadable checkpoint ({type(e).__name__}: {e})") from None


def average_state_dicts(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of model state dicts with the same keys (floating tensors only)."""
    if not states:
        raise ValueError("no checkpoints to average")
    keys = set(states[0])
    for i, s in enumerate(states[1:], 1):
        if set(s) != keys:
            raise ValueError(f"checkpoint {i} has different parameters from checkpoint 0")
    out = {}
    for k, v in states[0].items():
        if v.is_floating_point():
            acc = torch.zeros_like(v, dtype=torch.float64)
            for s in states:
                acc += s[k].double()
            out[k] = (acc / len(states)).to(v.dtype)
        else:
            out[k] = v.clone()
    return out


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Mean of the model weights stored in the training checkpoints ``paths``."""
    return average_state_dicts([load_checkpoint(p)["model"] for p in paths])
