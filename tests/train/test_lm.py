"""The decoder-only language-model task through the same loop, and generation."""

import gzip
import json

import pytest
import torch

from aiayn.cli import main
from aiayn.data.lm import TokenStream
from aiayn.data.tokenizer import CharTokenizer

TEXT = "Call me Ishmael. Some years ago, never mind how long precisely, I went to sea.\n" * 30


@pytest.fixture
def text_corpus(tmp_path):
    d = tmp_path / "text"
    d.mkdir()
    (d / "train.txt.gz").write_bytes(gzip.compress(TEXT.encode()))
    (d / "valid.txt.gz").write_bytes(gzip.compress(TEXT[:400].encode()))
    return d


def lm_args(corpus, out, tokenizer="char", steps=30):
    sets = {
        "model.preset": '"tiny"',
        "model.dropout": "0.0",
        "model.embedding_dropout": "0.0",
        "data.task": '"lm"',
        "data.tokenizer": f'"{tokenizer}"',
        "data.vocab_size": "300",
        "data.corpus": f'"{corpus}"',
        "data.block_size": "32",
        "train.max_tokens": "256",
        "train.warmup": "10",
        "train.lr_scale": "0.1",  # peak 5.6e-3 for d_model 32
        "train.label_smoothing": "0.0",
        "train.max_steps": str(steps),
        "train.threads": "1",
    }
    argv = ["train", "--out", str(out), "--quiet"]
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    return argv


def test_char_tokenizer_round_trip_and_unknowns(tmp_path):
    tok = CharTokenizer.train(["abc ab"])
    assert tok.vocab_size == 5 + 4
    assert tok.decode(tok.encode(["cab a"]))[0] == "cab a"
    assert tok.decode(tok.encode(["xa"]))[0] == "a"  # unseen x -> unk, dropped on decode
    tok.save(tmp_path)
    assert CharTokenizer.load(tmp_path / "tokenizer.json").chars == tok.chars


def test_blocks_cover_the_stream_and_shift_by_one():
    stream = TokenStream(torch.arange(100))
    batches = stream.batches(block_size=10, max_tokens=40, shuffle=False)
    assert all(torch.equal(b.targets, b.inputs + 1) for b in batches)
    assert batches[0].inputs.shape == (4, 10)
    again = stream.batches(10, 40, seed=1, epoch=2)
    assert [b.inputs.tolist() for b in again] == [
        b.inputs.tolist() for b in stream.batches(10, 40, seed=1, epoch=2)
    ]
    with pytest.raises(ValueError, match="fewer than data.block_size"):
        TokenStream(torch.arange(5)).batches(10, 40)


@pytest.mark.parametrize("tokenizer", ["char", "bpe"])
def test_lm_trains_and_generates(text_corpus, tmp_path, capsys, tokenizer):
    run = tmp_path / "run"
    assert main(lm_args(text_corpus, run, tokenizer, steps=150)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["valid_loss"] < 2.0  # the repeated sentence is learnt (chance: ln V)
    argv = ["generate", str(run / "model"), "--prompt", "Call me", "--max-new-tokens", "20"]
    assert main(argv + ["--seed", "1"]) == 0
    first = capsys.readouterr().out
    assert main(argv + ["--seed", "1"]) == 0
    assert capsys.readouterr().out == first  # seeded generation is reproducible
    assert first.startswith("Call me")


def test_generate_refuses_a_translation_model(tmp_path, capsys):
    from aiayn import ModelConfig, build_model
    from aiayn.data.tokenizer import CharTokenizer as CT
    from aiayn.modeldir import save_model_dir

    save_model_dir(tmp_path, build_model(ModelConfig.preset("tiny")))
    CT.train(["abc"]).save(tmp_path)
    assert main(["generate", str(tmp_path), "--prompt", "a"]) == 2
    assert "needs a decoder-only" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_the_stream_store_holds_the_text_line_by_line(text_corpus, tmp_path, kind):
    from aiayn.data import lm

    tokenizer = lm.train_tokenizer(text_corpus, kind, 300)
    stream = lm.load_stream(text_corpus, "train", tokenizer, tmp_path / "store", "sha")
    newline = tokenizer.encode(["\n"])[0]
    expected = [t for line in TEXT.splitlines() for t in tokenizer.encode([line])[0] + newline]
    assert stream.ids.tolist() == expected
    again = lm.load_stream(text_corpus, "train", tokenizer, tmp_path / "store", "sha")
    assert again._keep[0].meta == stream._keep[0].meta  # reused, not written again
    batches = stream.batches(block_size=10, max_tokens=40, seed=1, epoch=0)
    starts = set()
    for i in range(len(batches)):
        b = batches[i]
        assert batches.n_tokens(i) == b.targets.numel()
        assert torch.equal(b.targets[:, :-1], b.inputs[:, 1:])  # shifted by one
        starts |= {tuple(row[:3]) for row in b.inputs.tolist()}
    assert len(starts) > 1
    half = batches[: len(batches) // 2]
    assert [half[i].inputs.tolist() for i in range(len(half))] == [
        batches[i].inputs.tolist() for i in range(len(half))
    ]
