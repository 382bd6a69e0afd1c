import pytest
import torch

from aiayn import build_model
from aiayn.data.tokenizer import CharTokenizer
from aiayn.infer.embed import embed_texts


@pytest.fixture
def encoder(tiny):
    tokenizer = CharTokenizer.train(["abcdefghij klmnop"])
    config = tiny.replace(family="encoder-only", vocab_size=tokenizer.vocab_size)
    return build_model(config).eval(), tokenizer


def test_embeddings_are_the_mean_of_the_encoder_states(encoder):
    model, tokenizer = encoder
    texts = ["abc", "a much longer text", "j"]
    got = embed_texts(model, tokenizer, texts)
    assert got.shape == (3, model.config.d_model)
    for text, row in zip(texts, got, strict=True):  # alone, no padding: a plain mean
        ids = torch.tensor([tokenizer.encode([text], eos=True)[0]])
        torch.testing.assert_close(row, model.encode(ids)[0].mean(0), atol=1e-5, rtol=1e-5)


def test_normalised_embeddings_have_unit_length(encoder):
    model, tokenizer = encoder
    got = embed_texts(model, tokenizer, ["abc", "defg hij"], normalize=True)
    torch.testing.assert_close(got.norm(dim=-1), torch.ones(2), atol=1e-6, rtol=0)
    plain = embed_texts(model, tokenizer, ["abc", "defg hij"])
    torch.testing.assert_close(got, plain / plain.norm(dim=-1, keepdim=True))


def test_embeddings_need_an_encoder(tiny):
    tokenizer = CharTokenizer.train(["abc"])
    model = build_model(tiny.replace(vocab_size=tokenizer.vocab_size))
    with pytest.raises(ValueError, match="encoder-only"):
        embed_texts(model, tokenizer, ["abc"])
