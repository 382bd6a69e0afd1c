"""README's table of Phuong & Hutter's Algorithms 1-15: every name in it exists and its
docstring names the algorithm."""

import importlib
import re

from tests.conftest import REPO_ROOT


def table() -> dict[int, list[str]]:
    rows: dict[int, list[str]] = {}
    for line in (REPO_ROOT / "README.md").read_text().splitlines():
        match = re.match(r"\| Algorithm (\d+) \|", line)
        if match:
            number = int(match.group(1))
            assert number not in rows, f"Algorithm {number} has two rows"
            rows[number] = re.findall(r"`(aiayn(?:\.\w+)+)`", line)
    return rows


def resolve(dotted: str):
    """The module, class, function or method named by ``dotted``."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_every_algorithm_has_a_row_with_names():
    rows = table()
    assert sorted(rows) == list(range(1, 16))
    assert all(rows.values()), [n for n, names in rows.items() if not names]


def test_every_named_object_cites_its_algorithm():
    missing = [
        f"{name}: no 'Algorithm {number}'"
        for number, names in table().items()
        for name in names
        if not re.search(rf"Algorithm {number}(?!\d)", resolve(name).__doc__ or "")
    ]
    assert not missing, missing
