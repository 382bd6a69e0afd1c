"""``train.compile``: torch.compile for training, one layer at a time.

Compiling the whole model (``torch.compile(model, dynamic=True)``) traces everything around
the layers too: the masks made from the tokens, the selection of the real targets (a shape
that depends on the data), the cache and packing branches of inference. Its first step did
not finish within minutes on a GPU. Here each encoder and decoder layer is compiled on its
own (regional compilation): the six encoder layers share one compiled graph, so do the six
decoder layers, and the first compiled step costs two graphs' compilation, not a model's.
The loss, whose (n, V) logits are the batch's largest tensors, is compiled as well: Inductor
fuses the log-softmax, the gather and the row sums into fewer passes over them.

Shapes: batches vary in sentences and length. The first batch compiles for its shapes; the
first batch of other shapes compiles again with those dimensions symbolic (PyTorch's
automatic dynamic shapes), and later shapes reuse it. ``compiled_graphs`` counts the graphs
compiled so far, for the run's log.
"""

from __future__ import annotations

import inspect
from functools import partial

import torch
from torch import nn

from aiayn.model.layers import DecoderLayer, EncoderLayer
from aiayn.train.objectives import label_smoothed_nll


def compile_layers(model: nn.Module) -> int:
    """Compile every encoder and decoder layer of ``model`` in place (``nn.Module.compile``:
    parameter names and the state dict stay as they are). Returns the layers compiled."""
    layers = [m for m in model.modules() if isinstance(m, EncoderLayer | DecoderLayer)]
    for layer in layers:
        layer.compile()
    return len(layers)


def is_compiled(module: nn.Module) -> bool:
    """Whether ``module`` runs compiled (``compile_layers`` compiled it in place)."""
    return getattr(module, "_compiled_call_impl", None) is not None


def compiled_loss(loss_fn):
    """``loss_fn`` with its label-smoothed cross-entropy compiled, where it takes one
    (``nll_fn``: the token-level losses); the other losses are returned as they are."""
    if "nll_fn" not in inspect.signature(loss_fn).parameters:
        return loss_fn
    return partial(loss_fn, nll_fn=torch.compile(label_smoothed_nll, dynamic=True))


def compiled_graphs() -> int:
    """Graphs torch.compile has compiled in this process (each recompilation counts)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])
