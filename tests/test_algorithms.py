"""README's feature tables: every name in the table of Phuong & Hutter's Algorithms 1-15
exists and its docstring names the algorithm; every name in the table of Vaswani et al.'s
sections cites its section."""

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


def sections() -> dict[str, list[str]]:
    """README's table of Vaswani et al. (2017) sections: section -> the names it lists."""
    rows: dict[str, list[str]] = {}
    for line in (REPO_ROOT / "README.md").read_text().splitlines():
        match = re.match(r"\| (§[\d.]+) \|", line)
        if match:
            assert match.group(1) not in rows, f"{match.group(1)} has two rows"
            rows[match.group(1)] = re.findall(r"`(aiayn(?:\.\w+)+)`", line)
    return rows


def test_every_named_object_cites_its_section():
    rows = sections()
    assert {"§3.1", "§3.2.1", "§3.2.2", "§3.3", "§3.4", "§3.5", "§5.3", "§5.4", "§6.1"} <= set(rows)
    assert all(rows.values()), [s for s, names in rows.items() if not names]
    missing = [
        f"{name}: no '{section}'"
        for section, names in rows.items()
        for name in names
        if not re.search(rf"{re.escape(section)}(?![\d])", resolve(name).__doc__ or "")
    ]
    assert not missing, missing
