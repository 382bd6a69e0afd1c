"""Every float comparison in tests/ goes through tests/tolerance.py: a bare absolute tolerance
holds on the rounding of one CPU (AVX2, AVX-512, AMX, a thread count) and fails on another.

A comparison may keep an absolute bound when the bound is the point (a printed precision, a
sampling margin on a frequency); it says so with a ``# absolute: <why>`` comment on one of its
lines or on a comment line just above it."""

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
MARKER = re.compile(r"#\s*absolute:\s*\S")  # a reason must follow
# comparisons with their own float tolerance; their defaults are absolute, or host-tuned
ALWAYS = {
    "allclose",
    "isclose",
    "approx",
    "assert_allclose",
    "assert_almost_equal",
    "assert_array_almost_equal",
    "assertAlmostEqual",
}


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _is_zero(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0


def _is_number(node: ast.expr) -> bool:
    """A literal bound: 1e-5, -0.5, 2 * 1e-3 (no name in it that could carry a scale)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_number(node.left) and _is_number(node.right)
    return False


def _is_abs(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and _name(node.func) == "abs"


def _bare_tolerance(node: ast.AST) -> str | None:
    """Why ``node`` compares floats with a bare tolerance, or None."""
    if isinstance(node, ast.Call):
        name = _name(node.func)
        if name in ALWAYS:
            return f"{name}(...)"
        if name == "assert_close":
            kw = {k.arg: k.value for k in node.keywords}
            if not (_is_zero(kw.get("atol")) and _is_zero(kw.get("rtol"))):
                return "assert_close(...) with a tolerance (only atol=0, rtol=0 may stay)"
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if isinstance(op, ast.Lt | ast.LtE) and _is_abs(left) and _is_number(right):
            return "abs(...) below a literal"
        if isinstance(op, ast.Gt | ast.GtE) and _is_abs(right) and _is_number(left):
            return "abs(...) below a literal"
    return None


def bare_tolerances(source: str, filename: str = "<test>") -> list[str]:
    """``file:line: why`` for each float comparison with a bare tolerance and no marker."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        why = _bare_tolerance(node)
        if why is None:
            continue
        first = node.lineno - 1
        if first and lines[first - 1].lstrip().startswith("#"):  # a comment line just above
            first -= 1
        span = lines[first : node.end_lineno]
        if not any(MARKER.search(line) for line in span):
            found.append(f"{filename}:{node.lineno}: {why}")
    return sorted(found, key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def test_tests_compare_floats_through_the_tolerance_helper():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name != "tolerance.py":
            found += bare_tolerances(path.read_text(), str(path.relative_to(TESTS.parent)))
    assert not found, (
        "compare floats with tests.tolerance.assert_close_to_scale (or mark a bound that is "
        "absolute on purpose with '# absolute: <why>'):\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    "source",
    [
        "torch.testing.assert_close(a, b, atol=1e-5, rtol=0)",
        "torch.testing.assert_close(a, b)",  # its defaults are an absolute atol of 1e-5
        "torch.testing.assert_close(a, b, atol=0)",
        "assert torch.allclose(a, b)",
        "assert np.allclose(a, b, atol=1e-6)",
        "assert math.isclose(a, b, abs_tol=1e-9)",
        "assert x == pytest.approx(y, abs=1e-5)",
        "assert abs(x - y) < 1e-4",
        "assert abs(x - y) <= 2 * 1e-3",
        "assert 1e-4 > abs(x - y)",
        "torch.testing.assert_close(a, b, atol=1e-5)  # absolute:",  # a marker needs a reason
        "# absolute: printed with 4 decimals\n\nassert abs(x - y) < 1e-4",  # not just above
    ],
)
def test_a_bare_tolerance_is_found(source):
    assert len(bare_tolerances(source)) == 1


@pytest.mark.parametrize(
    "source",
    [
        "assert_close_to_scale(a, b)",
        "torch.testing.assert_close(a, b, atol=0, rtol=0)",  # exact
        "assert abs(x - y) <= 1e-5 * scale",  # scaled
        "assert torch.equal(a, b)",
        "assert abs(rate - 0.15) < 0.01  # absolute: a sampling margin on a frequency",
        "# absolute: sampling margins\nassert abs(a - 0.8) < 0.02 and abs(b - 0.1) < 0.02",
        "torch.testing.assert_close(\n    a,\n    b,  # absolute: printed with 4 decimals\n"
        "    atol=1e-4,\n)",
    ],
)
def test_scaled_exact_or_marked_comparisons_pass(source):
    assert bare_tolerances(source) == []
