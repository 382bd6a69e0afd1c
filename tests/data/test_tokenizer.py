import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.data.tokenizer import BOS, EOS, MASK, PAD, UNK, Tokenizer

TEXTS = [
    "Das Haus ist sehr alt.",
    "The house is very old.",
    "Ich habe heute keine Zeit für dich.",
    "I have no time for you today.",
] * 40


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.train(TEXTS, vocab_size=320)


def test_special_ids_are_fixed(tokenizer):
    sp = tokenizer.sp
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (PAD, UNK, BOS, EOS)
    assert sp.id_to_piece(MASK) == "<mask>"
    ids = tokenizer.encode(["Das Haus."], bos=True, eos=True)[0]
    assert ids[0] == BOS and ids[-1] == EOS


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_decode_encode_round_trips_any_text(tokenizer, text):
    # byte fallback: unseen characters (emoji, CJK, controls) still come back unchanged
    assert tokenizer.decode(tokenizer.encode([text]))[0] == text


def test_decode_stops_at_eos_and_drops_specials(tokenizer):
    ids = tokenizer.encode(["Das Haus."])[0]
    assert tokenizer.decode([[BOS] + ids + [EOS] + ids + [PAD]])[0] == "Das Haus."


def test_save_load_and_bad_files(tokenizer, tmp_path):
    tokenizer.save(tmp_path)
    loaded = Tokenizer.load(tmp_path)
    assert loaded.encode(["Zeit für dich"]) == tokenizer.encode(["Zeit für dich"])
    with pytest.raises(FileNotFoundError, match="no tokenizer"):
        Tokenizer.load(tmp_path / "elsewhere")
    (tmp_path / "bad.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="bad.model: not a sentencepiece model"):
        Tokenizer.load(tmp_path / "bad.model")


def test_too_large_vocabulary_is_a_clear_error():
    with pytest.raises(ValueError, match="vocab_size"):
        Tokenizer.train(TEXTS[:4], vocab_size=5000)


def test_mask_piece_in_text_is_plain_text(tokenizer):
    # "<mask>" typed in a review is characters, not the mask token masked-LM training uses
    ids = tokenizer.encode(["a <mask> b"])[0]
    assert MASK not in ids and tokenizer.decode([ids]) == ["a <mask> b"]


def test_case_folding_is_kept_in_the_model(tmp_path):
    folded = Tokenizer.train(TEXTS, vocab_size=320, case_fold=True)
    assert folded.folds_case and folded.encode(["DAS HAUS"]) == folded.encode(["das haus"])
    folded.save(tmp_path)
    assert Tokenizer.load(tmp_path).encode(["Das Haus"]) == folded.encode(["das haus"])
    plain = Tokenizer.train(TEXTS, vocab_size=320)
    assert not plain.folds_case and plain.encode(["DAS HAUS"]) != plain.encode(["das haus"])
