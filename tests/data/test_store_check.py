"""A token store is checked by content: each file's SHA-256 written with it, every id within
the vocabulary. A damaged store is named and encoded again; ids outside the vocabulary are
refused naming the file and the examples; a store written before the digests is encoded
again once."""

import hashlib
import json
import threading

import numpy as np
import pytest

from aiayn.config import DataConfig
from aiayn.data import lm, store_check
from aiayn.data.parallel import encode_split, sample_texts
from aiayn.data.store import (
    ABSENT,
    OLDER,
    Chunk,
    examine,
    open_or_write,
    open_store,
    write_store,
)
from aiayn.data.tokenizer import CharTokenizer, Tokenizer
from aiayn.errors import UserError
from tests.conftest import write_sample_corpus

FIELDS = ("src", "tgt")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_sample_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return Tokenizer.train(sample_texts(DataConfig(corpus=str(corpus))), 500)


def chunks(n=40, vocab=200, seed=0, bad=()):
    """``n`` examples of ids below ``vocab``; the examples in ``bad`` get one id of ``vocab``."""
    rng = np.random.default_rng(seed)
    fields = {
        f: [rng.integers(0, vocab, rng.integers(1, 9)).tolist() for _ in range(n)] for f in FIELDS
    }
    for i in bad:
        fields["src"][i][-1] = vocab
    return [
        Chunk({f: seqs[: n // 2] for f, seqs in fields.items()}),
        Chunk({f: seqs[n // 2 :] for f, seqs in fields.items()}),
    ]


def flip(path, byte=None, bit=0):
    """Flip one bit of ``path`` in place (the size stays): of the middle even byte by default
    (the low byte of an id: bit 0 keeps an id below 200 below 200)."""
    data = bytearray(path.read_bytes())
    at = len(data) // 4 * 2 if byte is None else byte
    data[at] ^= 1 << bit
    path.write_bytes(bytes(data))


def rewrite_digests(directory):
    """Record the files as they are now in meta.json, as if they had been written so."""
    meta = json.loads((directory / "meta.json").read_text())
    for name in meta["files"]:
        meta[store_check.DIGESTS][name] = hashlib.sha256(
            (directory / name).read_bytes()
        ).hexdigest()
    meta[store_check.SELF] = store_check.meta_digest(meta)
    (directory / "meta.json").write_text(json.dumps(meta))


def test_the_writer_records_each_files_sha256_and_its_own(tmp_path):
    write_store(tmp_path / "s", {"k": 1}, FIELDS, 200, chunks())
    meta = json.loads((tmp_path / "s" / "meta.json").read_text())
    names = {"src.ids", "src.offsets", "tgt.ids", "tgt.offsets", "order.idx"}
    assert set(meta["files"]) == set(meta[store_check.DIGESTS]) == names
    for name in names:  # the narrowed offsets included: the bytes on disk
        data = (tmp_path / "s" / name).read_bytes()
        assert meta[store_check.DIGESTS][name] == hashlib.sha256(data).hexdigest()
    assert meta[store_check.SELF] == store_check.meta_digest(meta)
    assert examine(tmp_path / "s", {"k": 1}, 200) == (meta, "")


@pytest.mark.parametrize(
    "name, byte",
    [
        ("src.ids", None),
        ("tgt.ids", 0),
        ("src.offsets", None),
        ("tgt.offsets", -1),
        ("order.idx", None),
        ("meta.json", "buckets"),  # a digit of a bucket's count: still JSON, still the key
    ],
)
def test_a_flipped_bit_in_any_file_is_named_and_the_store_is_encoded_again(
    tmp_path, capsys, name, byte
):
    directory, key = tmp_path / "s", {"k": 1}
    write_store(directory, key, FIELDS, 200, chunks())
    clean = {p.name: p.read_bytes() for p in directory.iterdir()}
    path = directory / name
    if byte == "buckets":
        text = path.read_text()
        byte = text.index('"buckets"') + text[text.index('"buckets"') :].index("1")
    flip(path, byte)  # an id stays within the vocabulary: only the digest can tell
    assert path.stat().st_size == len(clean[name])

    assert open_store(directory, key, 200) is None
    meta, problem = examine(directory, key, 200)
    assert meta is None and problem.startswith(name), problem
    writes = []

    def write(d):
        writes.append(d)
        write_store(d, key, FIELDS, 200, chunks())

    store = open_or_write(directory, key, write, writer=True, vocab_size=200)
    assert writes == [directory]
    err = capsys.readouterr().err
    assert f"token store {directory}: {name}" in err and "encoding the split again" in err
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == clean
    assert store.n == 40
    # checked and whole now: opened again, nothing is written or said
    open_or_write(directory, key, write, writer=True, vocab_size=200)
    assert writes == [directory] and capsys.readouterr().err == ""


def test_a_damaged_split_is_encoded_again_from_the_corpus(corpus, tokenizer, tmp_path, capsys):
    config = DataConfig(corpus=str(corpus), max_len=10_000)
    first = encode_split(config, tokenizer, "valid", False, tmp_path, "sha-a")
    expected = [x.tolist() for x in first.stores[0].sequences("src", np.arange(len(first)))]
    ids = tmp_path / "valid" / "src.ids"
    flip(ids, byte=1, bit=7)  # the high bit of the first id: far outside the vocabulary
    again = encode_split(config, tokenizer, "valid", False, tmp_path, "sha-a")
    assert f"{ids.name} does not match the SHA-256" in capsys.readouterr().err
    store = again.stores[0]
    got = store.sequences("src", np.arange(store.n))
    assert [x.tolist() for x in got] == expected


def test_a_damaged_text_store_is_encoded_again(tmp_path, capsys):
    import gzip

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "valid"):
        with gzip.open(corpus / f"{split}.txt.gz", "wt") as f:
            f.write("the cat sat on the mat\n" * 20)
    tok = CharTokenizer(sorted(set("the cat sat on mat\n")))
    clean = lm.load_stream(corpus, "train", tok, tmp_path / "store", "t").ids.tolist()
    flip(tmp_path / "store" / "train" / "text.ids")
    again = lm.load_stream(corpus, "train", tok, tmp_path / "store", "t")
    assert "text.ids does not match the SHA-256" in capsys.readouterr().err
    assert again.ids.tolist() == clean


@pytest.mark.parametrize("block", [store_check.BLOCK, 6])  # blocks of 3 ids: bad ones span them
def test_ids_outside_the_vocabulary_are_refused_naming_the_file_and_the_examples(
    tmp_path, monkeypatch, block
):
    monkeypatch.setattr(store_check, "BLOCK", block)
    directory, key = tmp_path / "s", {"k": 1}
    # written for a vocabulary of 1,000, opened with one of 200: the digests all match
    write_store(directory, key, FIELDS, 1000, chunks(bad=(7, 9, 30)))
    with pytest.raises(UserError) as caught:
        open_store(directory, key, 200)
    message = str(caught.value)
    assert message.startswith(f"{directory / 'src.ids'}: 3 src token id(s) outside")
    assert "vocabulary of 200 (the largest 200), in examples 7 to 30 of 40" in message
    assert f"delete {directory}" in message
    # the writer does not encode it again (it was not damaged on disk): refused there too
    with pytest.raises(UserError, match="examples 7 to 30"):
        open_or_write(directory, key, lambda d: None, writer=True, vocab_size=200)
    write_store(directory, key, FIELDS, 1000, chunks(bad=(12,)))
    with pytest.raises(UserError, match=r"1 src token id\(s\) .* in example 12 of 40"):
        open_store(directory, key, 200)
    assert open_store(directory, key, 201) is not None


def test_ids_pushed_out_of_range_with_matching_digests_are_refused(tmp_path):
    """As from a store edited on disk with its meta.json made to match."""
    directory, key = tmp_path / "s", {"k": 1}
    write_store(directory, key, FIELDS, 200, chunks())
    ids = np.fromfile(directory / "tgt.ids", "<u2")
    offsets = np.fromfile(directory / "tgt.offsets", "<u4")
    ids[offsets[5]] = 60000
    ids.tofile(directory / "tgt.ids")
    rewrite_digests(directory)
    with pytest.raises(UserError, match=r"tgt.ids: 1 tgt token id\(s\) .*largest 60000.*example 5"):
        open_store(directory, key, 200)


def test_a_store_written_before_the_digests_is_encoded_again_once(tmp_path, capsys):
    directory, key = tmp_path / "s", {"k": 1}
    write_store(directory, key, FIELDS, 200, chunks())
    meta = json.loads((directory / "meta.json").read_text())
    del meta[store_check.DIGESTS], meta[store_check.SELF]  # meta.json as version 1 wrote it
    (directory / "meta.json").write_text(json.dumps(meta, indent=1))
    assert examine(directory, key, 200) == (None, OLDER)
    writes = []

    def write(d):
        writes.append(d)
        write_store(d, key, FIELDS, 200, chunks())

    store = open_or_write(directory, key, write, writer=True, vocab_size=200)
    assert writes == [directory] and store.n == 40
    assert "written by an earlier aiayn" in capsys.readouterr().err
    assert store_check.DIGESTS in store.meta
    open_or_write(directory, key, write, writer=True, vocab_size=200)
    assert writes == [directory]  # once


def test_a_waiting_process_checks_each_store_once_and_never_takes_a_damaged_one(
    tmp_path, monkeypatch
):
    directory, key = tmp_path / "s", {"k": 1}
    assert examine(directory, key) == (None, ABSENT)
    write_store(directory, key, FIELDS, 200, chunks(seed=1))
    flip(directory / "src.ids")
    scans = []
    original = store_check.scan
    monkeypatch.setattr(
        store_check, "scan", lambda path, *a: scans.append(path) or original(path, *a)
    )
    found = []
    waiter = threading.Thread(
        target=lambda: found.append(
            open_or_write(directory, key, None, writer=False, vocab_size=200)
        )
    )
    waiter.start()
    for _ in range(600):  # the first check, however slow the machine
        if len(scans) >= 5:
            break
        waiter.join(timeout=0.05)
    waiter.join(timeout=1.5)  # three more polls of the damaged store
    assert waiter.is_alive() and not found
    assert len(scans) == 5  # its five files, read once
    write_store(directory, key, FIELDS, 200, chunks(seed=2))  # the writer's new store
    waiter.join(timeout=30)
    assert found[0].meta == json.loads((directory / "meta.json").read_text())


def test_a_store_that_is_damaged_as_soon_as_written_is_an_error_not_a_loop(tmp_path):
    directory, key = tmp_path / "s", {"k": 1}

    def write(d):
        write_store(d, key, FIELDS, 200, chunks())
        flip(d / "order.idx")

    with pytest.raises(UserError, match="just written, and already order.idx does not match"):
        open_or_write(directory, key, write, writer=True, vocab_size=200)


def test_the_check_reads_in_blocks(tmp_path, monkeypatch):
    """The whole file is never read at once: every read asks for one block."""
    write_store(tmp_path / "s", {}, FIELDS, 200, chunks(n=400))
    sizes = []
    real_open = open

    class Spy:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def readinto(self, buffer):
            sizes.append(len(buffer))
            return self.f.readinto(buffer)

    monkeypatch.setattr(store_check, "BLOCK", 64)
    monkeypatch.setattr(store_check, "open", lambda p, mode: Spy(real_open(p, mode)), raising=False)
    assert open_store(tmp_path / "s", {}, 200).n == 400
    assert sizes and set(sizes) == {64} and len(sizes) > 5 * 2
