"""Comparisons of floats that hold on every CPU the suite runs on.

Vectorised kernels sum in different orders on AVX2, AVX-512 and AMX hosts (and with another
thread count), so two correct computations of one tensor differ by a few units of float32
rounding *of the tensor's own magnitude*, not of each element: an element near zero can carry
an error as large as the largest element's. Element-wise ``atol``/``rtol`` pairs tuned on one
host therefore fail on another. These helpers bound the largest difference by a fraction of the
reference's largest magnitude instead, which is invariant to the host's instruction set yet
still catches a real difference (a dropped term, a wrong scale, a swapped index), since those
move the tensor by a sizeable fraction of its magnitude.

Every float comparison in tests/ goes through here; ``tests/test_tolerances.py`` fails on a
bare absolute tolerance elsewhere. Tensors, numpy arrays, (nested) lists and plain numbers are
accepted alike.
"""

from __future__ import annotations

import torch

# float32 rounding is ~6e-8 per operation; reordered sums of n terms drift by about
# sqrt(n) of that. 1e-5 of the tensor's scale leaves two orders of magnitude of headroom for
# the sizes used in the tests while staying far below any real mistake.
REL = 1e-5


def as_tensor(x) -> torch.Tensor:
    """A tensor as it is; numbers, lists and numpy arrays as float64 tensors."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    return torch.as_tensor(x, dtype=torch.float64)


def scale_of(t) -> float:
    """The largest magnitude (1 for an all-zero tensor, so zeros compare exactly-ish)."""
    t = as_tensor(t)
    m = t.abs().max().item() if t.numel() else 0.0
    return m if m > 0 else 1.0


def max_scaled_diff(actual, expected, scale: float | None = None) -> float:
    """max |actual - expected| divided by ``scale``: by default the largest magnitude in
    ``expected``; pass the scale of the quantity when ``expected`` is (near) zero, e.g. a
    learning rate that decays to 0 is compared on the scale of its peak."""
    actual, expected = as_tensor(actual), as_tensor(expected)
    assert actual.shape == expected.shape, f"shapes differ: {actual.shape} vs {expected.shape}"
    if not actual.numel():
        return 0.0
    diff = (actual.double() - expected.double()).abs().max().item()
    return diff / (scale_of(expected) if scale is None else scale)


def _same_dtype(actual, expected, msg: str) -> None:
    if isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype, (
            f"{msg} dtypes differ: {actual.dtype} vs {expected.dtype}"
        )


def assert_close_to_scale(
    actual, expected, rel: float = REL, msg: str = "", scale: float | None = None
) -> None:
    """Fail unless every element is within ``rel`` times the scale (``expected``'s largest
    magnitude unless ``scale`` is given) of ``expected``."""
    _same_dtype(actual, expected, msg)
    got = max_scaled_diff(actual, expected, scale)  # NaN (a non-finite element) fails too
    assert got <= rel, f"{msg} max |diff| is {got:.2e} of the scale (allowed {rel:.0e})"


def assert_differs_at_scale(actual, expected, rel: float = REL, msg: str = "") -> None:
    """Fail unless some element differs by more than ``rel`` of ``expected``'s scale: the
    opposite of :func:`assert_close_to_scale`, for "this change reaches the output"."""
    _same_dtype(actual, expected, msg)
    got = max_scaled_diff(actual, expected)
    assert got > rel, f"{msg} max |diff| is only {got:.2e} of the scale (needs > {rel:.0e})"
