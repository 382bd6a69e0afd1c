"""The vocabulary map: special ids to aiayn's slots, everything else in order, both ways."""

import pytest
import torch

from aiayn.data.vocab_map import VocabMap


def test_ids_and_rows_go_there_and_back():
    m = VocabMap(10, (9, 1, None, 0, None), copies={2: 9})  # pad last, bos a copy of it
    assert m.source_ids == [9, 1, -1, 0, -1, 2, 3, 4, 5, 6, 7, 8]
    assert m.size == 12 and m.extras == [2, 4]
    assert m.to_theirs(m.to_ours(list(range(10)))) == list(range(10))
    assert m.to_theirs([2, 4, 3]) == [0]  # extra rows have no original id
    w = torch.randn(10, 3)
    ours = m.rows_to_ours(w)
    assert torch.equal(ours[2], w[9]) and not ours[4].any()  # a copy; zeros
    assert torch.equal(m.rows_to_theirs(ours), w)
    bias = m.rows_to_ours(torch.randn(10), fill=float("-inf"), copies=False)
    assert torch.isneginf(bias[[2, 4]]).all() and torch.isfinite(bias[[0, 1, 3, 5]]).all()


def test_saved_and_loaded(tmp_path):
    m = VocabMap(7, (0, 3, 5, 6, None), backend="marian")
    m.save(tmp_path)
    assert VocabMap.load(tmp_path) == m


@pytest.mark.parametrize(
    "specials, copies, words",
    [
        ((1, 1, None, 2, None), {}, "distinct"),
        ((1, 2, 3, 4, 12), {}, "below 10"),
        ((1, 2, 3, 4), {}, "names 5 special ids"),
        ((1, 2, 3, 4, 5), {2: 7}, "not an extra row"),
    ],
)
def test_bad_maps_are_named(specials, copies, words):
    with pytest.raises(ValueError, match=words):
        VocabMap(10, specials, copies)


def test_a_corrupt_file_is_named(tmp_path):
    (tmp_path / "vocab_map.json").write_text('{"their_size": 4}')
    with pytest.raises(ValueError, match="vocab_map.json: not a vocabulary map"):
        VocabMap.load(tmp_path)
