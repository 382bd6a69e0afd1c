"""The imported tokenizers read text back exactly: byte-level BPE round-trips any text, Marian's
sentencepiece pair any text its models cover; the loader tells them apart by their files."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.data.hf_tokenizer import HFTokenizer
from aiayn.data.marian_tokenizer import MarianTokenizer
from aiayn.data.tokenizer import CharTokenizer, Tokenizer
from aiayn.data.vocab_map import VocabMap
from aiayn.modeldir.tokenizer_files import has_tokenizer, load_tokenizer

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def byte_bpe(tmp_path_factory):
    from tests.interop.hf_fixtures import byte_bpe_tokenizer

    directory = tmp_path_factory.mktemp("bpe")
    fast = byte_bpe_tokenizer(directory)
    eos = fast.convert_tokens_to_ids("<|endoftext|>")
    text = (directory / "tokenizer.json").read_text()
    return HFTokenizer(text, VocabMap(len(fast), (None, None, None, eos, None), {2: eos}))


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_byte_level_bpe_round_trips_any_text(byte_bpe, text):
    assert byte_bpe.decode(byte_bpe.encode([text])) == [text]


@pytest.fixture(scope="module")
def native_marian():
    """aiayn's own sentencepiece BPE as a Marian pair (what export writes)."""
    from aiayn.interop.hf_marian import _native_vocab
    from tests.interop.hf_fixtures import ding_lines

    tok = Tokenizer.train(ding_lines("de", 300) + ding_lines("en", 300), 360)
    vmap, vocab = _native_vocab(tok)
    return tok, MarianTokenizer(tok.proto, tok.proto, vocab, vmap)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40).map(str.strip))
def test_marian_pair_reads_text_as_the_sentencepiece_model_does(native_marian, text):
    tok, marian = native_marian
    assert marian.encode([text]) == tok.encode([text])  # the same ids, through vocab.json
    # U+2581 reads as a space, and Marian's decoding strips the text (as transformers' does):
    # a text of only U+2581 decodes to "" (hypothesis found it)
    assert marian.decode(marian.encode([text])) == [text.replace("\u2581", " ").strip()]


def test_the_loader_dispatches_on_the_files(tmp_path, byte_bpe, native_marian):
    for name, tok in (
        ("hf", byte_bpe),
        ("marian", native_marian[1]),
        ("char", CharTokenizer(["a"])),
    ):
        tok.save(tmp_path / name)
        assert has_tokenizer(tmp_path / name)
        assert type(load_tokenizer(tmp_path / name)) is type(tok)
