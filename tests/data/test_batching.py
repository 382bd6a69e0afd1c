import random

from aiayn.data.batching import collate, length_batches, shard
from aiayn.data.tokenizer import BOS, EOS, PAD
from tests.tolerance import assert_close_to_scale


def lengths(n=500, seed=0):
    rng = random.Random(seed)
    return [rng.randint(1, 60) for _ in range(n)]


def test_batches_respect_max_tokens_and_cover_every_example_once():
    ls = lengths()
    batches = length_batches(ls, max_tokens=256, seed=1, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(len(ls)))
    for b in batches:
        assert len(b) * max(ls[i] for i in b) <= 256


def test_grouping_by_length_keeps_padding_low():
    ls = lengths()
    batches = length_batches(ls, max_tokens=512, seed=1, epoch=0)
    padded = sum(len(b) * max(ls[i] for i in b) for b in batches)
    assert sum(ls) / padded > 0.9


def test_epochs_are_reproducible_and_different():
    ls = lengths()
    a = length_batches(ls, 256, seed=1, epoch=3)
    assert a == length_batches(ls, 256, seed=1, epoch=3)
    assert a != length_batches(ls, 256, seed=1, epoch=4)
    assert a != length_batches(ls, 256, seed=2, epoch=3)


def test_an_overlong_example_gets_its_own_batch():
    batches = length_batches([5, 300, 5], max_tokens=100, seed=0, epoch=0, shuffle=False)
    assert [1] in batches and sorted(map(len, batches)) == [1, 2]


def test_shards_are_disjoint_and_equal_in_number():
    batches = length_batches(lengths(), 256, seed=1, epoch=0)
    shards = [shard(batches, r, 3) for r in range(3)]
    assert len({len(s) for s in shards}) == 1
    flat = [tuple(b) for s in shards for b in s]
    assert len(flat) == len(set(flat)) and len(flat) >= len(batches) - 2


def test_collate_shifts_the_target_by_one():
    batch = collate([([7, 8, 9], [10, 11]), ([7], [12, 13, 14])], [0, 1])
    assert batch.src.tolist() == [[7, 8, 9, EOS], [7, EOS, PAD, PAD]]
    assert batch.tgt_in.tolist() == [[BOS, 10, 11, PAD], [BOS, 12, 13, 14]]
    assert batch.tgt_out.tolist() == [[10, 11, EOS, PAD], [12, 13, 14, EOS]]
    assert batch.n_tokens == 7
    assert_close_to_scale(batch.efficiency, (6 + 7) / 16, rel=1e-12)


def test_collate_frames_sources_as_asked():
    batch = collate([([7, 8], [10]), ([7], [12])], [0, 1], frame=([BOS], []))
    assert batch.src.tolist() == [[BOS, 7, 8], [BOS, 7, PAD]]
    assert batch.tgt_out.tolist() == [[10, EOS], [12, EOS]]
