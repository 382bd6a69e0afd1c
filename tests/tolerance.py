"""Comparisons of float tensors that hold on every CPU the suite runs on.

Vectorised kernels sum in different orders on AVX2, AVX-512 and AMX hosts, so two correct
computations of one tensor differ by a few units of float32 rounding *of the tensor's own
magnitude*, not of each element: an element near zero can carry an error as large as the
largest element's. Element-wise ``atol``/``rtol`` pairs tuned on one host therefore fail on
another. These helpers bound the largest difference by a fraction of the reference tensor's
largest magnitude instead, which is invariant to the host's instruction set yet still catches
a real difference (a dropped term, a wrong scale, a swapped index), since those move the tensor
by a sizeable fraction of its magnitude.
"""

from __future__ import annotations

import torch

# float32 rounding is ~6e-8 per operation; reordered sums of n terms drift by about
# sqrt(n) of that. 1e-5 of the tensor's scale leaves two orders of magnitude of headroom for
# the sizes used in the tests while staying far below any real mistake.
REL = 1e-5


def scale_of(t: torch.Tensor) -> float:
    """The tensor's largest magnitude (1 for an all-zero tensor, so zeros compare exactly-ish)."""
    m = t.detach().abs().max().item() if t.numel() else 0.0
    return m if m > 0 else 1.0


def max_scaled_diff(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |actual - expected| divided by the largest magnitude in ``expected``."""
    assert actual.shape == expected.shape, f"shapes differ: {actual.shape} vs {expected.shape}"
    diff = (actual.detach().double() - expected.detach().double()).abs().max().item()
    return diff / scale_of(expected)


def assert_close_to_scale(
    actual: torch.Tensor, expected: torch.Tensor, rel: float = REL, msg: str = ""
) -> None:
    """Fail unless every element is within ``rel`` times ``expected``'s largest magnitude."""
    assert actual.dtype == expected.dtype, (
        f"{msg} dtypes differ: {actual.dtype} vs {expected.dtype}"
    )
    got = max_scaled_diff(actual, expected)  # NaN (a non-finite element) fails too
    assert got <= rel, f"{msg} max |diff| is {got:.2e} of the tensor's scale (allowed {rel:.0e})"
