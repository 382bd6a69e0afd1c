"""Token stores: written streaming and atomically, keyed, read memory-mapped; epoch plans
cut from their length buckets."""

import gzip
import os
import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.config import DataConfig
from aiayn.data.batching import collate, length_batches
from aiayn.data.files import iter_line_chunks, read_lines, read_parallel
from aiayn.data.parallel import encode_split, load_texts, sample_texts
from aiayn.data.plan import cut_buckets
from aiayn.data.store import (
    Chunk,
    StoreWriter,
    input_key,
    open_store,
    read_meta,
    remove_partial_writes,
    write_store,
)
from aiayn.data.tokenizer import Tokenizer
from tests.conftest import write_sample_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    write_sample_corpus(directory)
    return directory


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return Tokenizer.train(sample_texts(DataConfig(corpus=str(corpus))), 500)


def random_chunks(rng, n_chunks=3, vocab=70000):
    return [
        Chunk(
            {
                "src": [rng.integers(0, vocab, rng.integers(0, 9)).tolist() for _ in range(50)],
                "tgt": [rng.integers(0, vocab, rng.integers(1, 9)).tolist() for _ in range(50)],
            }
        )
        for _ in range(n_chunks)
    ]


@pytest.mark.parametrize("vocab, width", [(300, "<u2"), (65536, "<u2"), (70000, "<u4")])
def test_a_store_reads_back_what_was_written(tmp_path, vocab, width):
    chunks = random_chunks(np.random.default_rng(0), vocab=vocab)
    with pytest.raises(ValueError, match=f"token id {vocab} is outside the vocabulary"):
        write_store(
            tmp_path / "bad", {}, ("src", "tgt"), vocab, [Chunk({"src": [[vocab]], "tgt": [[1]]})]
        )
    write_store(tmp_path / "s", {"k": 1}, ("src", "tgt"), vocab, chunks)
    store = open_store(tmp_path / "s", {"k": 1})
    src = [x for c in chunks for x in c.fields["src"]]
    tgt = [x for c in chunks for x in c.fields["tgt"]]
    assert store.n == len(src) == 150
    assert store.ids["src"].dtype == np.dtype(width)
    everything = np.arange(store.n)
    assert [s.tolist() for s in store.sequences("src", everything)] == src
    assert [t.tolist() for t in store.sequences("tgt", everything)] == tgt
    # the order is a stable sort by the longest side + 1; the buckets slice it
    key = [max(len(s), len(t)) + 1 for s, t in zip(src, tgt, strict=True)]
    assert store.order.tolist() == sorted(range(store.n), key=lambda i: key[i])
    for length, start, count in zip(
        store.bucket_lengths, store.bucket_starts, store.bucket_counts, strict=True
    ):
        assert {key[i] for i in store.order[start : start + count]} == {length}
    # size on disk: the ids at their width, plus offsets (uint32) and order (int32)
    ids_bytes = sum(store.meta["fields"][f]["tokens"] for f in ("src", "tgt")) * int(width[-1])
    assert store.disk_bytes <= ids_bytes + store.n * (2 * 4 + 4) + 4096
    assert store.offsets["src"].dtype == np.dtype("<u4")
    assert open_store(tmp_path / "s", {"k": 2}) is None  # another key: not this store


def test_a_write_that_fails_or_is_cut_leaves_nothing_that_loads(tmp_path):
    def failing():
        yield from random_chunks(np.random.default_rng(0), 2)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_store(tmp_path / "s", {}, ("src", "tgt"), 70000, failing())
    assert list(tmp_path.iterdir()) == []  # no store, no temporary directory
    # a writer that never commits (as after kill -9): its directory does not load
    writer = StoreWriter(tmp_path / "s", {}, ("src", "tgt"), 70000)
    writer.append(random_chunks(np.random.default_rng(0), 1)[0])
    assert open_store(tmp_path / "s", {}) is None
    remove_partial_writes(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_store_with_a_truncated_or_missing_file_does_not_load(tmp_path):
    write_store(tmp_path / "s", {}, ("src", "tgt"), 70000, random_chunks(np.random.default_rng(0)))
    assert read_meta(tmp_path / "s") is not None
    ids = tmp_path / "s" / "tgt.ids"
    ids.write_bytes(ids.read_bytes()[:-2])
    assert read_meta(tmp_path / "s") is None
    ids.unlink()
    assert open_store(tmp_path / "s", {}) is None


def test_kill_9_while_writing_leaves_no_store_and_the_next_write_succeeds(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys, time
        from aiayn.data.store import Chunk, write_store
        def chunks():
            for i in range(10**6):
                if i == 3:
                    print("writing", flush=True)
                time.sleep(0.01)
                yield Chunk({{"src": [[5, 6, 7]] * 100, "tgt": [[8]] * 100}})
        write_store({str(tmp_path / "s")!r}, {{}}, ("src", "tgt"), 300, chunks())
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    assert open_store(tmp_path / "s", {}) is None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".s.tmp-")]
    write_store(
        tmp_path / "s", {}, ("src", "tgt"), 300, random_chunks(np.random.default_rng(0), vocab=300)
    )
    assert open_store(tmp_path / "s", {}).n == 150


def test_the_store_matches_the_tokenizer_and_the_pairs(corpus, tokenizer, tmp_path):
    config = DataConfig(corpus=str(corpus), max_len=10_000)
    data = encode_split(config, tokenizer, "valid", False, tmp_path, "sha-a")
    pairs = load_texts(config, "valid")
    store = data.stores[0]
    src = tokenizer.encode([s for s, _ in pairs])
    assert [x.tolist() for x in store.sequences("src", np.arange(store.n))] == src
    # the batches are the in-memory path's collate of the same pairs
    tgt = tokenizer.encode([t for _, t in pairs])
    for batch in data.batches(200, shuffle=False):
        expected = collate([(src[i], tgt[i]) for i in batch.index], batch.index)
        for name in ("src", "tgt_in", "tgt_out"):
            assert getattr(batch, name).tolist() == getattr(expected, name).tolist()


@pytest.mark.parametrize("frame", [([], []), ([2], [3]), ([2], [])])
def test_the_batches_frame_sources_as_the_model_reads_them(corpus, tokenizer, tmp_path, frame):
    """A model that reads sources bare or framed by bos (``ModelConfig.source_frame``, an
    imported OpenNMT-py model's) is trained on sources framed so."""
    config = DataConfig(corpus=str(corpus), max_len=10_000)
    data = encode_split(config, tokenizer, "valid", False, tmp_path, "sha-a", frame=frame)
    src = tokenizer.encode([s for s, _ in load_texts(config, "valid")])
    for batch in data.batches(200, shuffle=False):
        for row, i in zip(batch.src.tolist(), batch.index, strict=True):
            framed = frame[0] + src[i] + frame[1]
            assert row == framed + [0] * (len(row) - len(framed))  # then padding


def test_a_changed_corpus_file_or_tokenizer_is_encoded_again(corpus, tokenizer, tmp_path):
    local = tmp_path / "corpus"
    local.mkdir()
    for name in ("valid.de.gz", "valid.en.gz"):
        (local / name).write_bytes((corpus / name).read_bytes())
    config = DataConfig(corpus=str(local))
    root = tmp_path / "store"
    first = encode_split(config, tokenizer, "valid", False, root, "sha-a")
    assert len(first) == 40
    again = encode_split(config, tokenizer, "valid", False, root, "sha-a")
    assert again.stores[0].meta == first.stores[0].meta  # reused, not rewritten
    # the same size, one word changed: the SHA-256 tells
    with gzip.open(local / "valid.de.gz", "rt") as f:
        lines = f.read().split("\n")
    lines[0] = "Hallo Welt"
    with gzip.open(local / "valid.de.gz", "wt") as f:
        f.write("\n".join(lines))
    changed = encode_split(config, tokenizer, "valid", False, root, "sha-a")
    assert (
        changed.stores[0].sequences("src", np.array([0]))[0].tolist()
        == tokenizer.encode(["Hallo Welt"])[0]
    )
    other = encode_split(config, tokenizer, "valid", False, root, "sha-b")
    assert other.stores[0].meta["key"]["tokenizer_sha256"] == "sha-b"
    assert sorted(p.name for p in root.iterdir()) == ["valid"]  # one store, replaced


def test_key_names_each_file_by_size_and_sha256(tmp_path):
    (tmp_path / "a").write_bytes(b"abc")
    key = input_key([tmp_path / "a"], "t")
    assert key["files"][0]["size"] == 3
    assert key["files"][0]["sha256"].startswith("ba7816bf")


def lengths(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, 60, n)


@pytest.mark.parametrize("max_tokens", [1, 7, 64, 256, 5000])
def test_the_bucket_cut_is_the_greedy_cut_over_sorted_lengths(max_tokens):
    ls = lengths()
    greedy = length_batches(ls.tolist(), max_tokens, seed=0, epoch=0, shuffle=False)
    values, counts = np.unique(ls, return_counts=True)
    ranges = cut_buckets(values, counts, max_tokens)
    assert (ranges[:, 1] - ranges[:, 0]).tolist() == [len(b) for b in greedy]
    assert ranges[0, 0] == 0 and ranges[-1, 1] == len(ls)
    assert (ranges[1:, 0] == ranges[:-1, 1]).all()


def test_epoch_batches_cover_every_kept_pair_once_within_max_tokens(corpus, tokenizer, tmp_path):
    config = DataConfig(corpus=str(corpus), max_len=30)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = encode_split(config, tokenizer, "train", True, tmp_path, "x")
    kept = [
        i
        for i, (s, t) in enumerate(load_texts(config, "train"))
        if max(len(tokenizer.encode([s])[0]), len(tokenizer.encode([t])[0])) + 1 <= 30
    ]
    assert any("dropped" in str(w.message) for w in caught) and len(data) == len(kept)
    batches = data.batches(256, seed=3, epoch=1)
    seen = []
    for i in range(len(batches)):
        batch = batches[i]
        seen += batch.index
        assert batch.src.numel() <= 256 and batch.tgt_out.numel() <= 256
        assert batches.n_tokens(i) == batch.n_tokens
    assert sorted(seen) == kept
    again = data.batches(256, seed=3, epoch=1)
    assert [b.index for b in again] == [b.index for b in batches]  # a function of (seed, epoch)
    assert [b.index for b in data.batches(256, seed=3, epoch=2)] != [b.index for b in batches]
    assert [b.index for b in data.batches(256, seed=4, epoch=1)] != [b.index for b in batches]


def test_ranks_share_the_batches_and_repeats_count_on(corpus, tokenizer, tmp_path):
    config = DataConfig(corpus=str(corpus), max_len=10_000, train_repeat=2)
    data = encode_split(config, tokenizer, "train", True, tmp_path, "x")
    assert len(data) == 800
    everything = data.batches(300, seed=1, epoch=0)
    assert sorted(i for b in everything for i in b.index) == list(range(800))
    shares = [data.batches(300, seed=1, epoch=0, rank=r, world_size=3) for r in range(3)]
    assert len({len(s) for s in shares}) == 1
    flat = [tuple(b.index) for s in shares for b in s]
    assert len(flat) == len(set(flat)) and len(flat) >= len(everything) - 2
    assert set(flat) <= {tuple(b.index) for b in everything}


text_lines = st.lists(
    st.text(alphabet=st.sampled_from("ab \r\u00e9\u4e2d"), max_size=12), max_size=20
)


@settings(max_examples=60, deadline=None)
@given(lines=text_lines, ending=st.sampled_from(["\n", "\r\n"]), chunk=st.integers(1, 40))
def test_streamed_lines_equal_the_lines_read_whole(tmp_path_factory, lines, ending, chunk):
    path = tmp_path_factory.mktemp("lines") / "t.txt"
    path.write_bytes(("\ufeff" + ending.join(lines)).encode())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        streamed = [line for block in iter_line_chunks(path, chunk) for line in block]
        assert streamed == read_lines(path)


def test_streamed_pairs_equal_pairs_read_whole(corpus):
    from aiayn.data.files import iter_parallel

    a, b = corpus / "train.de.gz", corpus / "train.en.gz"
    assert [p for chunk in iter_parallel(a, b, 512) for p in chunk] == read_parallel(a, b)


def rss_file_kb():
    import re

    status = open("/proc/self/status").read()
    return int(re.search(r"RssFile:\s+(\d+)", status).group(1))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_release_drops_the_pages_read_from_the_resident_set(tmp_path):
    big = Chunk({"src": [[7] * 4_000_000], "tgt": [[8]]})  # 8 MB of uint16 ids
    write_store(tmp_path / "s", {}, ("src", "tgt"), 300, [big])
    store = open_store(tmp_path / "s", {})
    before = rss_file_kb()
    assert int(store.ids["src"].sum(dtype=np.int64)) == 28_000_000  # reads every page
    read = rss_file_kb()
    store.release()
    assert read - before > 6_000 and read - rss_file_kb() > 6_000
    assert int(store.ids["src"][-1]) == 7  # still readable after


def test_read_ahead_yields_in_order_raises_errors_and_stops_its_thread():
    import threading

    from aiayn.data.parallel import read_ahead

    assert list(read_ahead(iter(range(100)))) == list(range(100))

    def broken():
        yield 1
        raise OSError("the disk went away")

    with pytest.raises(OSError, match="disk went away"):
        list(read_ahead(broken()))
    early = read_ahead(iter(range(10**6)), depth=1)
    assert next(early) == 0
    early.close()
    assert not any(t.name == "aiayn-read-ahead" for t in threading.enumerate())
