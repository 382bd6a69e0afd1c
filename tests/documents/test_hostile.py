"""Every malformed or hostile file (``hostile.CASES``) is refused by ``aiayn.documents.read``
with a ``DocumentError`` naming the file and the problem, quickly, reading no more than the
limits allow and writing nothing."""

import time

import pytest

from aiayn import documents
from tests.documents.hostile import BOUNDED, CASES, LIMITS

pytest.importorskip("docx")


def test_there_are_thirty_and_more():
    assert len(CASES) >= 30


@pytest.mark.parametrize("label, name, data, message", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_file_is_refused_naming_the_problem(tmp_path, monkeypatch, label, name,
                                                      data, message):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()
    with pytest.raises(documents.DocumentError) as refused:
        documents.read(data, name, documents.Limits(**LIMITS))
    assert time.monotonic() - start < 10
    assert str(refused.value).startswith(f"{name}: ")
    assert message in str(refused.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("label, name, data", BOUNDED, ids=[c[0] for c in BOUNDED])
def test_a_hostile_file_that_is_read_stays_small(label, name, data):
    """Its text is what a reader sees, not what its markup asks for (4 million spaces)."""
    from aiayn.documents.base import tree_text

    opened = documents.read(data, name, documents.Limits(**LIMITS))
    assert 0 < sum(len(tree_text(d.root)) for d in opened.documents) < 10_000


def test_the_samples_themselves_are_read():
    """The hostile files are built from these: each is refused for what was done to it."""
    from tests.documents import samples

    for ext, (build, _) in samples.FORMATS.items():
        opened = documents.read(build(), f"sample{ext}", documents.Limits(**LIMITS))
        assert opened.documents
