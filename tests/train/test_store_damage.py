"""`aiayn train` never trains on a damaged token store: a flipped bit in the run's store is
named and the split encoded again, so the model is the clean run's; ids outside the
vocabulary in a store whose bytes are those written are refused naming the file and the
examples, not an IndexError deep in the embedding."""

import hashlib
import json
import warnings

import numpy as np
import pytest
from safetensors.numpy import load_file

from aiayn.cli import main
from aiayn.config import load_run_config
from aiayn.data import store_check
from aiayn.modeldir.tokenizer_files import load_tokenizer, tokenizer_sha256
from aiayn.train.tasks import StoreAccess, make_task
from tests.conftest import tiny_run_overrides, write_sample_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_sample_corpus(tmp_path_factory.mktemp("damage") / "corpus", n_valid=20)


def train(corpus, out, *flags):
    argv = ["train", "--out", str(out), "--quiet", *flags]
    for o in tiny_run_overrides(corpus, max_steps=3):
        argv += ["--set", o]
    return main(argv)


@pytest.fixture(scope="module")
def clean(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "run"
    assert train(corpus, out) == 0
    return load_file(out / "model" / "model.safetensors")


def first_batch(corpus, out):
    """The examples of the run's first training batch (from its store, before any damage):
    damage there changes the model of a three-step run."""
    run = load_run_config(None, tiny_run_overrides(corpus, max_steps=3))
    task = make_task(run)
    access = StoreAccess(out / "store", tokenizer_sha256(out), write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the pairs over data.max_len, dropped
        task.load(load_tokenizer(out), access)
    return task.train_batches(0)[0].index


def flip_bit(path, dtype, at, value=1):
    """XOR entry ``at`` of the array in ``path`` with ``value`` (the size stays)."""
    array = np.fromfile(path, dtype)
    array[at] ^= value
    array.tofile(path)


@pytest.mark.parametrize(
    "name, how",
    [
        ("src.ids", "bit flip"),  # an id that stays within the vocabulary
        ("tgt.ids", "out of range"),  # an id pushed past the vocabulary of 400
        ("src.offsets", "bit flip"),
        ("order.idx", "bit flip"),
    ],
)
def test_a_damaged_store_is_encoded_again_and_trains_the_clean_model(
    corpus, clean, tmp_path, capsys, name, how
):
    out = tmp_path / "run"
    assert train(corpus, out, "--prepare-only") == 0
    store = out / "store" / "train"
    example = first_batch(corpus, out)[0]
    offsets = np.fromfile(store / "src.offsets", "<u4")
    path = store / name
    size = path.stat().st_size
    if name == "src.ids":
        flip_bit(path, "<u2", offsets[example])
    elif name == "tgt.ids":
        flip_bit(path, "<u2", np.fromfile(store / "tgt.offsets", "<u4")[example], 0x8000)
    elif name == "src.offsets":
        flip_bit(path, "<u4", example + 1)  # where the example ends, and the next begins
    else:
        order = np.fromfile(path, "<i4")
        flip_bit(path, "<i4", int(np.flatnonzero(order == example)[0]))
    assert path.stat().st_size == size
    capsys.readouterr()
    assert train(corpus, out) == 0
    err = capsys.readouterr().err
    assert f"token store {store}: {name} does not match the SHA-256" in err
    got = load_file(out / "model" / "model.safetensors")
    assert got.keys() == clean.keys()
    assert all(np.array_equal(got[k], clean[k]) for k in clean)


def test_ids_outside_the_vocabulary_are_refused_by_name(corpus, tmp_path, capsys):
    """A store whose meta.json was made to match ids pushed out of range."""
    out = tmp_path / "run"
    assert train(corpus, out, "--prepare-only") == 0
    store = out / "store" / "train"
    ids = np.fromfile(store / "src.ids", "<u2")
    offsets = np.fromfile(store / "src.offsets", "<u4")
    ids[offsets[17] : offsets[19]] = 65535  # examples 17 and 18
    ids.tofile(store / "src.ids")
    meta = json.loads((store / "meta.json").read_text())
    meta[store_check.DIGESTS]["src.ids"] = hashlib.sha256(ids.tobytes()).hexdigest()
    meta[store_check.SELF] = store_check.meta_digest(meta)
    (store / "meta.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert train(corpus, out) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "IndexError" not in err
    assert f"{store / 'src.ids'}: " in err
    assert "src token id(s) outside the vocabulary of 400 (the largest 65535)" in err
    assert "in examples 17 to 18 of 400" in err and f"delete {store}" in err
