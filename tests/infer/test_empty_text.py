"""An empty text (or one of whitespace only): its translation is the empty text, whatever the
search; classifying it is refused, naming the text; the others are unaffected. (Embedding it
gives the embedding of the framing tokens alone, tests/infer/test_embed.py.)"""

import pytest
import torch

from aiayn import build_model
from aiayn.config import ModelConfig
from aiayn.data.tokenizer import CharTokenizer
from aiayn.errors import UserError
from aiayn.infer.classify import classify_texts
from aiayn.infer.sampling import Sampling
from aiayn.infer.translate import translate, translate_best

TEXT = "abcdefghijklmnopqrstuvwxyz .,"


def model_of(family, **config):
    tokenizer = CharTokenizer.train([TEXT])
    torch.manual_seed(0)
    cfg = ModelConfig.preset(
        "tiny", family=family, vocab_size=tokenizer.vocab_size, max_len=32, **config
    )
    return build_model(cfg).eval(), tokenizer


@pytest.mark.parametrize(
    "options",
    [{}, {"beam": 2, "nbest": 2}, {"sampling": Sampling(1.0, None, 1.0, 3), "nbest": 3}],
    ids=["greedy", "beam", "sampling"],
)
def test_an_empty_text_translates_to_the_empty_text(options):
    model, tokenizer = model_of("encoder-decoder")
    texts = ["", "das ist gut.", "   ", "\t"]
    out = translate(model, tokenizer, texts, max_len_offset=10, **options)
    for k in (0, 2, 3):
        assert out[k] == [("", 0.0)]
    alone = translate(
        model, tokenizer, ["das ist gut."], max_len_offset=10, first_index=1, **options
    )
    # the other texts translate as they would alone (greedy search gives no score: NaN)
    assert [t for t, _ in out[1]] == [t for t, _ in alone[0]]
    assert str([s for _, s in out[1]]) == str([s for _, s in alone[0]])
    assert translate_best(model, tokenizer, [""]) == [""]


def test_classifying_an_empty_text_is_refused_naming_it():
    model, tokenizer = model_of("encoder-only", n_decoder_layers=0, n_classes=2)
    with pytest.raises(UserError, match="text 2 is empty: there is nothing to classify"):
        classify_texts(model, tokenizer, ["good", " ", "bad"])
    assert classify_texts(model, tokenizer, ["good", "bad"]).shape == (2, 2)
