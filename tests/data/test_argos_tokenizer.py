"""An Argos Translate package's tokenizer against Argos Translate's own (argostranslate's
``SentencePieceTokenizer`` and ``BPETokenizer``): the same pieces for the same text, the same
text for the same output pieces; ids as CTranslate2 looks the pieces up in its
vocabularies, mapped onto aiayn's special ids; kept in a model directory and loaded back."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.data.argos_tokenizer import (
    ArgosTokenizer,
    check_bpe_codes,
    ct2_vocab_maps,
    read_ct2_vocabularies,
)
from aiayn.data.tokenizer import BOS, EOS, MASK, PAD
from aiayn.errors import UserError
from aiayn.interop.argos_package import package_tokenizer, read_package
from aiayn.modeldir import check_vocabulary
from aiayn.modeldir.tokenizer_files import load_tokenizer, tokenizer_paths, tokenizer_sha256
from tests.interop.argos_fixtures import (  # noqa: F401 (fixtures)
    argos_packages,
    bpe_package,
    ding_lines,
    marian_package,
    prenorm_package,
)

argostranslate_tokenizer = pytest.importorskip(
    "argostranslate.tokenizer", reason="Argos Translate is the reference here"
)
KINDS = ("prenorm", "marian", "bpe")
TRICKY = [
    "",
    "Hallo Welt!",
    "  two  spaces,   leading and trailing  ",
    'Tom & Jerry\'s "quoted" <tag> [x] | pipes',
    "3.5 e.g. U.S.A. -- a dash - and a hyphen-word",
    "« guillemets » „Anführung“ — em dash … ellipsis",
    "emoji 🙂 and 漢字 and ünïcödé",
    "tab\there, new\nline",
    "snake_case_name and __dunder__",
    "@@ signs @@@ and ▁ marks",
]


@pytest.fixture(scope="module")
def packages(argos_packages, tmp_path_factory):  # noqa: F811
    into = tmp_path_factory.mktemp("argos-read")
    return {kind: read_package(path, into) for kind, path in argos_packages.items()}


def ours(package, **options) -> ArgosTokenizer:
    return package_tokenizer(package, **options)


def theirs(package):
    if package.tokenizer == "sentencepiece":
        return argostranslate_tokenizer.SentencePieceTokenizer(package.tokenizer_model)
    return argostranslate_tokenizer.BPETokenizer(
        package.tokenizer_model, package.source, package.target
    )


@pytest.fixture(scope="module")
def pairs(packages):
    """(ours, theirs, package) by kind."""
    return {kind: (ours(p), theirs(p), p) for kind, p in packages.items()}


def argos_output(argos, pieces: list[str]) -> str:
    """A translation's text as Argos Translate makes it from CTranslate2's pieces (no target
    prefix here): decoded, then one leading space dropped (translate.py)."""
    value = argos.decode(pieces)
    return value[1:] if value.startswith(" ") else value


@pytest.mark.parametrize("kind", KINDS)
def test_pieces_are_argos_translates(pairs, kind):
    tokenizer, argos, package = pairs[kind]
    texts = ding_lines("de", 60)[-30:] + ding_lines("en", 60)[-30:] + TRICKY
    for text in texts:
        assert tokenizer.pieces(text) == argos.encode(text), text


@pytest.mark.parametrize("kind", ["prenorm", "bpe"])
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=40))
def test_pieces_of_any_text_are_argos_translates(pairs, kind, text):
    tokenizer, argos, _ = pairs[kind]
    assert tokenizer.pieces(text) == argos.encode(text)


@pytest.mark.parametrize("kind", KINDS)
def test_ids_are_the_ct2_vocabularys_mapped_onto_aiayns(pairs, kind):
    """A piece's id is its index in the CTranslate2 vocabulary (unk where it is missing),
    as CTranslate2 reads it; aiayn's ids map back onto those indices."""
    tokenizer, argos, package = pairs[kind]
    source, target = read_ct2_vocabularies(package.model_dir)
    unk = source.index("<unk>")
    for text in ding_lines("en", 20) + TRICKY:
        pieces = argos.encode(text)
        want = [source.index(p) if p in source else unk for p in pieces]
        got = tokenizer.encode([text], eos=True)[0]
        assert got[-1] == EOS
        assert tokenizer.source_map.to_theirs(got[:-1]) == want
    assert tokenizer.vocab_size == tokenizer.vocab_map.size
    assert tokenizer.source_vocab_size == tokenizer.source_map.size
    assert (target is None) == (tokenizer.source_map is tokenizer.vocab_map)


@pytest.mark.parametrize("kind", KINDS)
def test_output_pieces_read_as_argos_translate_reads_them(pairs, kind):
    tokenizer, argos, _ = pairs[kind]
    targets = tokenizer.targets
    specials = {targets[i] for i in tokenizer.vocab_map.specials if i is not None}
    plain = [i for i, t in enumerate(targets) if t not in specials and "_" not in t]
    import random

    rng = random.Random(kind)
    for _ in range(200):
        theirs_ids = [rng.choice(plain) for _ in range(rng.randint(1, 12))]
        ids = tokenizer.vocab_map.to_ours(theirs_ids)
        pieces = [targets[i] for i in theirs_ids]
        assert tokenizer.target_pieces(ids + [EOS, 7, 9]) == pieces  # eos ends the output
        assert tokenizer.decode([ids + [EOS]]) == [argos_output(argos, pieces)]
        assert tokenizer.decode([[BOS, *ids, PAD, PAD]]) == tokenizer.decode([ids])


def test_underscores_stay_though_argos_translate_makes_them_spaces(tmp_path):
    """Argos Translate 1.10+ turns every "_" of a sentencepiece translation into a space;
    aiayn keeps the text as sentencepiece decodes it."""
    from aiayn.data.tokenizer import Tokenizer

    sp = Tokenizer.train(["snake_case_name and more_words"] * 20, vocab_size=280)
    vocab = [sp.id_to_piece(i) for i in range(sp.vocab_size)]
    tokenizer = ArgosTokenizer(
        "sentencepiece", sp.proto, vocab, None, ct2_vocab_maps({}, vocab, None), "en", "en"
    )
    model = tmp_path / "sentencepiece.model"
    model.write_bytes(sp.proto)
    argos = argostranslate_tokenizer.SentencePieceTokenizer(model)
    ids = tokenizer.encode_target(["snake_case_name"])[0]
    pieces = tokenizer.target_pieces(ids)
    assert pieces == argos.encode("snake_case_name")
    assert tokenizer.decode([ids]) == ["snake_case_name"]
    assert argos_output(argos, pieces) == "snake case name"


@pytest.mark.parametrize("kind", ["prenorm", "bpe"])
def test_target_texts_are_cut_by_the_target_side(pairs, kind):
    tokenizer, argos, package = pairs[kind]
    for text in ding_lines("en", 10):
        target_ids = tokenizer.encode_target([text])[0]
        if kind == "prenorm":  # one sentencepiece model, one vocabulary: as the source
            assert target_ids == tokenizer.encode([text])[0]
        if kind == "bpe":  # Moses' rules of the target language
            argos = argostranslate_tokenizer.BPETokenizer(
                package.tokenizer_model, package.target, package.target
            )
        pieces = argos.encode(text)
        assert tokenizer.target_pieces(target_ids) == [
            p if p in tokenizer.targets else "<unk>" for p in pieces
        ]


def test_a_target_prefix_starts_the_output_and_is_dropped(packages, tmp_path):
    package = packages["prenorm"]
    tokenizer = ours(package)
    prefix = next(t for t in tokenizer.targets if t.startswith("▁") and len(t) > 2)
    with_prefix = ArgosTokenizer(
        tokenizer.kind,
        tokenizer.model,
        tokenizer.source,
        tokenizer.target,
        (tokenizer.source_map, tokenizer.vocab_map),
        "de",
        "en",
        target_prefix=prefix,
    )
    [prefix_id] = with_prefix.target_prefix_ids
    assert with_prefix.target_pieces([prefix_id]) == [prefix]
    ids = tokenizer.encode_target(["Haus und Hund"])[0]
    assert with_prefix.decode([[prefix_id, *ids]]) == tokenizer.decode([ids])
    assert with_prefix.decode([ids]) == tokenizer.decode([ids])  # not there: nothing dropped
    assert tokenizer.target_prefix_ids == []
    copy = tmp_path / package.name
    shutil.copytree(package.path, copy)
    (copy / "metadata.json").write_text(json.dumps({**package.metadata, "target_prefix": "__xx__"}))
    with pytest.raises(UserError, match="target prefix '__xx__' .* is not a token") as refused:
        package_tokenizer(read_package(copy))
    assert str(refused.value).startswith(str(copy / "sentencepiece.model"))


def test_special_ids_follow_the_ct2_config(packages):
    """OpenNMT-py: <blank> pads, <s> starts; Marian: </s> starts (an extra bos row, zeros or a
    copy of eos), no pad in the vocabulary (an extra row)."""
    onmt = ours(packages["prenorm"])
    targets = onmt.targets
    assert [targets[i] for i in onmt.vocab_map.specials[:4]] == ["<blank>", "<unk>", "<s>", "</s>"]
    marian = ours(packages["marian"])
    assert marian.vocab_map.specials[PAD] is None and marian.vocab_map.specials[BOS] is None
    assert marian.vocab_map.copies == {BOS: marian.targets.index("</s>")}
    zero = ours(packages["marian"], start_from_zero_embedding=True)
    assert zero.vocab_map.copies == {} and zero.vocab_size == marian.vocab_size
    assert marian.vocab_size == len(marian.targets) + 3  # pad, bos and mask: extra rows
    bpe = ours(packages["bpe"])
    assert bpe.target is not None and bpe.source_vocab_size != bpe.vocab_size
    for vmap, vocab in ((bpe.source_map, bpe.source), (bpe.vocab_map, bpe.target)):
        assert [vocab[i] for i in vmap.specials[:4]] == ["<blank>", "<unk>", "<s>", "</s>"]
        assert vmap.specials[MASK] is None


def test_vocab_maps_name_a_missing_special():
    with pytest.raises(UserError, match="the target vocabulary has no '</s>'"):
        ct2_vocab_maps({}, ["<unk>", "<s>", "a"], None)
    with pytest.raises(UserError, match="no '<unknown>'"):
        ct2_vocab_maps({"unk_token": "<unknown>"}, ["<unk>", "<s>", "</s>"], None)
    with pytest.raises(UserError, match="eos_token must be a token"):
        ct2_vocab_maps({"eos_token": 3}, ["<unk>", "<s>", "</s>"], None)
    source, target = ct2_vocab_maps({}, ["<unk>", "x"], ["<unk>", "<s>", "</s>"])
    assert source.specials == (None, 0, None, None, None)  # no <s> or </s> on the source
    assert target.specials == (None, 0, 1, 2, None)


@pytest.mark.parametrize("kind", KINDS)
def test_kept_in_a_model_directory_and_loaded_back(pairs, kind, tmp_path):
    tokenizer, _, _ = pairs[kind]
    tokenizer.save(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, ArgosTokenizer)
    assert (loaded.kind, loaded.source_lang, loaded.target_lang) == (
        tokenizer.kind,
        tokenizer.source_lang,
        tokenizer.target_lang,
    )
    assert loaded.vocab_map == tokenizer.vocab_map and loaded.source_map == tokenizer.source_map
    texts = ding_lines("en", 15)
    assert loaded.encode(texts) == tokenizer.encode(texts)
    assert loaded.decode(tokenizer.encode_target(texts)) == tokenizer.decode(
        tokenizer.encode_target(texts)
    )
    names = sorted(p.name for p in tokenizer_paths(tmp_path))
    assert names == sorted(p.name for p in tmp_path.iterdir())  # every file is the tokenizer's
    digest = tokenizer_sha256(tmp_path)
    (tmp_path / tokenizer.model_file_name).write_bytes(b"changed")
    assert tokenizer_sha256(tmp_path) != digest


def test_a_separate_source_vocabulary_is_checked_against_the_model(pairs, tiny):
    import dataclasses

    tokenizer = pairs["bpe"][0]
    config = dataclasses.replace(
        tiny,
        src_vocab_size=tokenizer.source_vocab_size,
        tgt_vocab_size=tokenizer.vocab_size,
        tie_embeddings="none",
    )
    check_vocabulary(config, tokenizer, "model")
    swapped = dataclasses.replace(
        config, src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.source_vocab_size
    )
    with pytest.raises(UserError, match=r"\d+ source and \d+ target tokens"):
        check_vocabulary(swapped, tokenizer, "model")


def test_texts_that_are_not_text_are_refused(pairs):
    tokenizer = pairs["bpe"][0]
    with pytest.raises(UserError, match="text 2 is a int"):
        tokenizer.encode(["fine", 3])
    with pytest.raises(UserError, match="lone surrogate"):
        pairs["prenorm"][0].encode(["bad \ud800"])
    with pytest.raises(UserError, match="outside the tokenizer's vocabulary"):
        tokenizer.decode([[tokenizer.vocab_size]])


def test_bpe_codes_subword_nmt_cannot_read_are_refused():
    check_bpe_codes("#version: 0.2\na b\nab c\n")
    check_bpe_codes("a b\n")  # no version line: 0.1
    for codes, message in [
        ("#version: 0.3\na b\n", "version 0.3"),
        ("#version: 0.2\n", "no merge operations"),
        ("#version: 0.2\na b\nabc\n", "line 3: 'abc' is not a merge"),
        ("a b c\n", "line 1"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_bpe_codes(codes)


def test_a_bad_tokenizer_file_is_named(packages, tmp_path):
    package = packages["bpe"]
    bad = tmp_path / "bpe.model"
    bad.write_text("#version: 0.2\nnot-a-merge\n")
    with pytest.raises(UserError, match="line 2") as refused:
        ArgosTokenizer.from_files("bpe", bad, package.model_dir, "en", "es")
    assert str(refused.value).startswith(str(bad))
    bad.write_bytes(b"not a sentencepiece model")
    with pytest.raises(UserError, match="not a sentencepiece model"):
        ArgosTokenizer.from_files("sentencepiece", bad, package.model_dir, "en", "es")
    (tmp_path / "argos_tokenizer.json").write_text(json.dumps({"kind": "wordpiece"}))
    with pytest.raises(UserError, match="kind 'wordpiece' is not one of sentencepiece, bpe"):
        ArgosTokenizer.load(tmp_path)
