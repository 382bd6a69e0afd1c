"""Weight layout for decoding on a CPU: linear weights stored transposed in memory.

``nn.Linear`` keeps W as (out, in), row-major, and computes x W^T: BLAS then multiplies by a
transposed operand. From few rows (a decoding step: one row per sentence still decoding) MKL
is markedly faster when W^T itself is the contiguous operand (on an AVX-512 Xeon 1.5-1.8x for
16 rows, 1.0x for 2400: ``python bench/experiments/linear_layout.py``; a decoding step 1.1-1.2x
at 4-64 sentences: ``bench/experiments/ab_decode.py --mode step``). ``column_major_weights``
re-lays each linear weight out so; its shape, values, ties and every result stay as they were
(up to the float rounding of a different summation order), only the strides change: F.linear
reads it untransposed.
"""

from __future__ import annotations

from torch import nn


def column_major_weights(model: nn.Module) -> int:
    """Store every ``nn.Linear`` weight of ``model`` as the transpose of a contiguous (in, out)
    tensor, in place (a tied embedding shares it); returns how many distinct linear weights
    the model holds (all now so laid out).

    For inference: a weight so stored is not contiguous, which a caller that saves tensors
    must undo (``.contiguous()``); gradients and training work unchanged but gain nothing.
    """
    done: set[int] = set()
    for module in model.modules():
        if not isinstance(module, nn.Linear) or id(module.weight) in done:
            continue
        done.add(id(module.weight))
        w = module.weight.data
        if w.stride(0) != 1:  # not laid out yet
            module.weight.data = w.t().contiguous().t()
    return len(done)
