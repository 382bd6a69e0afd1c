"""Sentence embeddings: pooled encoder states, alone or batched, and the ``aiayn embed`` CLI."""

import io
import json

import pytest
import torch

from aiayn import ModelConfig, build_model
from aiayn.cli import main
from aiayn.data.tokenizer import EOS, CharTokenizer
from aiayn.infer.embed import embed_texts
from aiayn.modeldir import save_model_dir
from tests.tolerance import assert_close_to_scale

TEXTS = ["a wonderful film", "", "dull", "great acting and a moving story, truly", "x y z"]


def encoder(pooling="mean", **changes):
    config = ModelConfig.preset("tiny", family="encoder-only", pooling=pooling, **changes)
    return build_model(config.replace(n_decoder_layers=0)).eval()


@pytest.fixture
def tokenizer():
    return CharTokenizer.train(TEXTS)


def alone(model, tokenizer, text):
    """The reference: one text, no padding, its states pooled by hand."""
    tokens = torch.tensor([tokenizer.encode([text])[0] + [EOS]])  # (1, T)
    h = model.encode(tokens)[0]  # (T, D)
    return {"mean": h.mean(0), "max": h.amax(0), "first": h[0]}[model.config.pooling]


@pytest.mark.parametrize("pooling", ["mean", "max", "first"])
def test_embeddings_pool_real_tokens_and_ignore_the_batch(tokenizer, pooling):
    model = encoder(pooling)
    got = embed_texts(model, tokenizer, TEXTS)
    assert got.shape == (len(TEXTS), 32) and got.dtype == torch.float32
    for i, text in enumerate(TEXTS):
        assert_close_to_scale(got[i], alone(model, tokenizer, text))
    small = embed_texts(model, tokenizer, TEXTS, batch_size=2)  # other batches, other padding
    assert_close_to_scale(small, got)
    reordered = embed_texts(model, tokenizer, TEXTS[::-1])
    assert_close_to_scale(reordered.flip(0), got)
    assert embed_texts(model, tokenizer, []).shape == (0, 32)


def test_normalize_gives_unit_vectors_in_the_same_direction(tokenizer):
    model = encoder()
    raw = embed_texts(model, tokenizer, TEXTS)
    unit = embed_texts(model, tokenizer, TEXTS, normalize=True)
    assert_close_to_scale(unit.norm(dim=-1), torch.ones(len(TEXTS)))
    assert_close_to_scale(unit * raw.norm(dim=-1, keepdim=True), raw)


def test_long_texts_are_truncated_to_max_len_with_a_warning(tokenizer):
    model = encoder(max_len=8)
    with pytest.warns(UserWarning, match="1 texts truncated to 8 tokens"):
        got = embed_texts(model, tokenizer, ["a wonderful film"])
    assert_close_to_scale(got[0], alone(model, tokenizer, "a wonde"))


def test_only_encoder_only_models_embed(tokenizer):
    config = ModelConfig.preset("tiny", family="decoder-only")
    with pytest.raises(ValueError, match="encoder-only model, not a decoder-only one"):
        embed_texts(build_model(config), tokenizer, TEXTS)


@pytest.fixture
def model_dir(tmp_path, tokenizer):
    model = encoder(n_classes=2, vocab_size=tokenizer.vocab_size)  # a classifier embeds too
    save_model_dir(tmp_path / "m", model)
    tokenizer.save(tmp_path / "m")
    return tmp_path / "m"


@pytest.mark.parametrize("normalize", [False, True])
def test_cli_prints_one_exact_json_list_per_line(
    model_dir, tokenizer, normalize, monkeypatch, capsys
):
    from aiayn.modeldir import load_model_dir

    monkeypatch.setattr("sys.stdin", io.StringIO("".join(t + "\n" for t in TEXTS)))
    flags = ["--normalize"] if normalize else []
    assert main(["embed", str(model_dir), "--chunk", "2", *flags]) == 0
    lines = capsys.readouterr().out.splitlines()
    got = torch.tensor([json.loads(line) for line in lines], dtype=torch.float32)
    expected = embed_texts(load_model_dir(model_dir), tokenizer, TEXTS, normalize=normalize)
    assert len(lines) == len(TEXTS)
    assert_close_to_scale(got, expected)  # chunks of 2 batch apart


def test_cli_errors_name_the_problem(model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("text\n"))
    assert main(["embed", str(model_dir), "--chunk", "0"]) == 2
    assert "--chunk must be >= 1" in capsys.readouterr().err
    lm = tmp_path / "lm"
    save_model_dir(lm, build_model(ModelConfig.preset("tiny", family="decoder-only")))
    CharTokenizer.train(TEXTS).save(lm)
    assert main(["embed", str(lm)]) == 2
    assert "embed needs an encoder-only model" in capsys.readouterr().err
