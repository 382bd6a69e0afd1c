"""Where training runs: device, mixed precision, and data-parallel processes.

One process is the default. Under ``torchrun`` (which sets RANK, WORLD_SIZE, LOCAL_RANK and
the rendezvous address) each process joins a process group (NCCL on CUDA, gloo on the CPU),
takes its own share of every global batch, and DistributedDataParallel averages the gradients;
only rank 0 writes files. Mixed precision follows the usual CUDA recipe: bf16 autocast where
the GPU supports it, fp16 autocast with a gradient scaler otherwise, TF32 matmuls for fp32.
"""

from __future__ import annotations

import functools
import os
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial

import torch
import torch.distributed as dist
from torch import nn

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


@dataclass(frozen=True)
class Context:
    """This process's place in the run."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    precision: str = "fp32"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def autocast(self):
        """A context manager for the forward passes (a no-op in fp32)."""
        if self.precision == "fp32":
            return nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(self.device.type, dtype=dtype)

    def grad_scaler(self) -> torch.amp.GradScaler:
        """Loss scaling for fp16; disabled (a pass-through) otherwise."""
        return torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")


def pick_device(choice: str, local_rank: int = 0) -> torch.device:
    if choice not in DEVICES:
        raise ValueError(f"train.device must be one of {', '.join(DEVICES)}, got {choice!r}")
    if choice == "cuda" and not torch.cuda.is_available():
        raise ValueError("train.device=cuda, but no CUDA device is available (use cpu or auto)")
    if choice == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", local_rank)


@functools.cache
def cpu_bf16() -> str | None:
    """The bf16 units of this CPU that PyTorch's oneDNN multiplies on ("amx_bf16" or
    "avx512_bf16"), or None."""
    try:
        capabilities = torch.cpu.get_capabilities()
    except (AttributeError, RuntimeError):  # an older torch, or a CPU it cannot read
        return None
    for unit in ("amx_bf16", "avx512_bf16"):
        if capabilities.get(unit):
            return unit
    return None


def pick_precision(choice: str, device: torch.device) -> str:
    """``auto``: bf16 on a GPU that has it, fp16 on an older GPU; on the CPU bf16 where it has
    bf16 units (``cpu_bf16``), fp32 elsewhere. On a CPU with AVX-512 bf16 the demo's 15
    minutes gave 1.51x the steps and a better model (docs/training.md)."""
    if choice not in PRECISIONS:
        raise ValueError(f"train.precision must be one of {', '.join(PRECISIONS)}, got {choice!r}")
    if device.type != "cuda":
        if choice == "fp16":
            raise ValueError(
                "train.precision=fp16 needs a CUDA device; use fp32 or bf16 on the CPU"
            )
        if choice == "auto":
            return "bf16" if cpu_bf16() else "fp32"
        return choice
    if choice == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if choice == "bf16" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"train.precision=bf16: {torch.cuda.get_device_name(device)} lacks bf16")
    return choice


def precision_reason(choice: str, device: torch.device, picked: str) -> str:
    """Why ``picked`` was chosen, for the run's log."""
    if choice != "auto":
        return f"train.precision = {choice}"
    if device.type == "cuda":
        return f"train.precision = auto: {picked} on {torch.cuda.get_device_name(device)}"
    if picked == "bf16":
        return f"train.precision = auto: this CPU has {cpu_bf16()} units"
    return "train.precision = auto: this CPU has no bf16 units"


def setup(device: str = "auto", precision: str = "fp32") -> Context:
    """Join the process group when launched by torchrun; choose device and precision."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    where = pick_device(device, local_rank)
    if where.type == "cuda":
        torch.cuda.set_device(where)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if where.type == "cuda" else "gloo")
    return Context(rank, world_size, where, pick_precision(precision, where))


def wrap(module: nn.Module, ctx: Context, find_unused: bool = False) -> nn.Module:
    """DistributedDataParallel around ``module`` when there are several processes."""
    if not ctx.distributed:
        return module
    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(
        module, device_ids=ids, find_unused_parameters=find_unused
    )


def no_sync(module: nn.Module, skip: bool):
    """Skip DDP's gradient all-reduce for the inner micro-batches of an accumulation."""
    if skip and isinstance(module, nn.parallel.DistributedDataParallel):
        return module.no_sync()
    return nullcontext()


def all_reduce_sum(values: list[float], ctx: Context) -> list[float]:
    """Sum ``values`` over all processes (a no-op for one process)."""
    if not ctx.distributed:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t)
    return t.tolist()


def gather(obj, ctx: Context) -> list:
    """Every process's ``obj``, in rank order."""
    if not ctx.distributed:
        return [obj]
    out = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(ctx: Context) -> None:
    if ctx.distributed:
        dist.barrier()


def teardown(ctx: Context) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()


class Objective(nn.Module):
    """Model + loss as one module, so that DDP sees every loss's forward (its hooks then
    synchronise the gradients) whatever head the loss uses."""

    def __init__(self, model: nn.Module, loss_fn) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = partial(loss_fn)

    def forward(self, batch, smoothing: float, pad_id: int):
        return self.loss_fn(self.model, batch, smoothing, pad_id)
