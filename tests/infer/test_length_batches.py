"""Throughput mode: sentences sorted by length, batches filled by tokens."""

from hypothesis import given
from hypothesis import strategies as st

from aiayn.infer.translate import length_batches


def test_short_sentences_share_large_batches():
    lengths = [30, 2, 2, 3, 2, 30, 3]
    batches = length_batches(lengths, max_tokens=12)
    # cut from the longest down: 30 fits only alone; 3 x 4 = 12 fits; one 2 is left over
    assert batches == [[4], [2, 1, 6, 3], [5], [0]]


@given(st.lists(st.integers(1, 40), max_size=60), st.integers(1, 200))
def test_every_sentence_once_within_budget_unless_alone(lengths, max_tokens):
    batches = length_batches(lengths, max_tokens)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert longest * len(b) <= max_tokens or len(b) == 1
    order = [i for b in batches for i in b]
    assert [lengths[i] for i in order] == sorted(lengths)
    for b in batches[1:]:  # all but the shortest batch are full: one more would not fit
        assert max(lengths[i] for i in b) * (len(b) + 1) > max_tokens
