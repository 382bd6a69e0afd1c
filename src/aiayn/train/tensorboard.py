"""Training metrics as TensorBoard event files (``train.tensorboard = true``), beside
``metrics.jsonl``: every number of a record that has a step, as the scalar ``train/KEY`` or,
for a validation record, ``valid/KEY``, through ``torch.utils.tensorboard`` (the
``tensorboard`` extra). ``tensorboard --logdir RUN/tensorboard`` shows them.

A resumed run replays the steps after its checkpoint: the writer opens with
``purge_step`` at the first of them, so TensorBoard hides what an earlier attempt logged from
there on, and every step appears once, as in ``metrics.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.errors import UserError

DIRECTORY = "tensorboard"  # inside the run directory
INSTALL = "pip install 'aiayn[tensorboard]'"
NOT_SCALARS = ("step", "epoch", "best")


def summary_writer():
    """``torch.utils.tensorboard.SummaryWriter``, or an error saying how to install it
    (checked before a run writes anything)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UserError(f"train.tensorboard needs TensorBoard: {INSTALL}") from None
    return SummaryWriter


class TensorBoardLog:
    """Writes metrics records to ``directory`` from the step after ``resumed_step`` on."""

    def __init__(self, directory: Path, resumed_step: int) -> None:
        self.writer = summary_writer()(str(directory), purge_step=resumed_step + 1)

    def write(self, record: dict) -> None:
        step = record.get("step")
        if "event" in record or not isinstance(step, int) or isinstance(step, bool):
            return
        group = "valid" if any(key.startswith("valid_") for key in record) else "train"
        for key, value in record.items():
            if key in NOT_SCALARS or isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                self.writer.add_scalar(f"{group}/{key}", value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
