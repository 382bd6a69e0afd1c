"""Counting host syncs on a CPU: the operations that, on a GPU, make the host wait for the
device to finish its queued work before it can go on.

They are: reading a value back (``item``, ``bool``, ``int``, ``float``, ``tolist``,
``numpy``), ``nonzero`` and the operations built on it (indexing by a boolean mask,
``masked_select``), whose output size the host must learn. ``torch.cuda.set_sync_debug_mode``
catches the same on a GPU; on a CPU the calls are counted as they pass: wrapped methods for
the read-backs (in inference mode they bypass the dispatcher), a dispatch mode for the
operators.
"""

from __future__ import annotations

import contextlib
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
SYNCING = {aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default}
READ_BACKS = ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__")
INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default}


class _Mode(TorchDispatchMode):
    def __init__(self, counts: Counter) -> None:
        super().__init__()
        self.counts = counts
        self.reading = 0  # inside a wrapped read-back, counted already

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.reading:
            pass
        elif func in SYNCING:
            self.counts[str(func)] += 1
        elif func in INDEXING and any(
            i is not None and i.dtype == torch.bool for i in args[1]
        ):  # a boolean mask: nonzero inside
            self.counts[f"{func} (mask)"] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def count_syncs():
    """Yields a ``Counter`` of host syncs by kind, filled while the block runs."""
    counts: Counter = Counter()
    mode = _Mode(counts)
    with pytest.MonkeyPatch.context() as patch:
        for name in READ_BACKS:
            method = getattr(torch.Tensor, name)

            def counted(self, *args, _method=method, _name=name, **kwargs):
                counts[_name] += not mode.reading
                mode.reading += 1
                try:
                    return _method(self, *args, **kwargs)
                finally:
                    mode.reading -= 1

            patch.setattr(torch.Tensor, name, counted)
        with mode:
            yield counts
