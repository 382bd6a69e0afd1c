"""CTranslate2 models in: a Marian model converted by CTranslate2's TransformersConverter and
pre-norm Transformers saved by CTranslate2's spec API (the OpenNMT-py / eole layout), in
float32, float16 and int8, decode as CTranslate2 decodes them (compute_type float32): the
same greedy tokens on every sentence, beam 4's best on (nearly) every one, the same
log-probabilities; and what aiayn's model lacks is refused, naming it, with nothing written.
"""

from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from aiayn.errors import UserError
from aiayn.infer.beam import beam_decode
from aiayn.infer.greedy import greedy_decode
from aiayn.infer.translate import source_ids
from aiayn.interop.ctranslate2.importer import import_argos_package, import_ctranslate2
from aiayn.interop.ctranslate2.reader import read_model_bin, read_variables
from aiayn.modeldir import load_model_and_tokenizer
from tests.conftest import REPO_ROOT
from tests.interop import ct2_fixtures as fx
from tests.tolerance import assert_close_to_scale

ctranslate2 = pytest.importorskip("ctranslate2", reason="CTranslate2 is not installed")
pytest.importorskip("transformers", reason="the Marian fixture is made by transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

QUANTIZATIONS = [None, "float16", "int8"]
OFFSET = 8  # tokens past the source's length a translation may run to


def sentences(n: int, lang: str = "de") -> list[str]:
    lines = gzip.decompress((REPO_ROOT / f"data/ding-de-en/test.{lang}.gz").read_bytes())
    return [line for line in lines.decode().splitlines() if line.strip()][:n]


@dataclass
class Case:
    """A CTranslate2 model, its sentencepiece models and its import."""

    ct2: Path
    spm: list[Path]
    ours: Path

    def __post_init__(self) -> None:
        self.model, self.tokenizer = load_model_and_tokenizer(self.ours)
        self.translator = ctranslate2.Translator(str(self.ct2), compute_type="float32")

    def pieces(self, texts: list[str]) -> list[list[str]]:
        """What a CTranslate2 user passes: the source sentencepiece model's pieces."""
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(self.spm[0]))
        return [sp.encode(t, out_type=str) for t in texts]

    def sources(self, texts: list[str]) -> list[list[int]]:
        return source_ids(self.model, self.tokenizer, texts)[0]

    def tokens(self, ids: list[int]) -> list[str]:
        return [self.tokenizer.id_to_piece(i) for i in ids if i != self.model.config.pad_id]


def _write_spm(directory: Path, protos: list[bytes]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    names = ["sentencepiece.model"] if len(protos) == 1 else ["source.spm", "target.spm"]
    for name, proto in zip(names, protos, strict=True):
        (directory / name).write_bytes(proto)
    return [directory / n for n in names]


def _imported(root: Path, ct2: Path, spm: list[Path]) -> Case:
    import_ctranslate2(ct2, root / "ours", tokenizer=spm)
    return Case(ct2, spm, root / "ours")


@pytest.fixture(scope="session")
def marian(tmp_path_factory) -> dict:
    cases = {}
    for q in QUANTIZATIONS:
        root = tmp_path_factory.mktemp(f"ct2-marian-{q}")
        ct2, spm = fx.marian_ct2(root, q)
        cases[q] = _imported(root, ct2, spm)
    return cases


@pytest.fixture(scope="session")
def onmt(tmp_path_factory) -> dict:
    """Pre-norm, one shared vocabulary and tied embeddings, the sinusoid stored: as the
    OpenNMT-py converter writes an Argos Translate model."""
    proto = fx.shared_spm()
    vocab = fx.vocabulary(proto, seed=1)
    cases = {}
    for q in QUANTIZATIONS:
        root = tmp_path_factory.mktemp(f"ct2-onmt-{q}")
        spm = _write_spm(root / "spm", [proto])
        ct2 = fx.spec_ct2(root / "ct2", vocab, quantization=q)
        cases[q] = _imported(root, ct2, spm)
    return cases


VARIANTS = {
    # separate vocabularies, no table stored (CTranslate2 computes its own), GELU, sources
    # ending in eos, LayerNorm's epsilon given, the output tied to the decoder's input only
    "separate": dict(positions="computed", activation="gelu", tie="decoder", qkv_bias=True,
                     add_source_eos=True, layer_norm_epsilon=1e-6),
    # post-norm, OpenNMT-py's float32 table (not quite the sinusoid), decoding starting from
    # eos (a copy of its row), the embeddings shared but not the output, the tanh GELU
    "post-norm": dict(pre_norm=False, positions="float32", tie="inputs", activation="gelu_tanh",
                      decoder_start_token="</s>", add_source_bos=False),
    # the two other dtypes CTranslate2 saves: bfloat16, and int16 (one scale a tensor)
    "bfloat16": dict(quantization="bfloat16", activation="swish"),
    "int16": dict(quantization="int16"),
}  # fmt: skip


@pytest.fixture(scope="session")
def variants(tmp_path_factory) -> dict:
    source, target = fx.source_target_spm()
    shared = fx.shared_spm()
    cases = {}
    for name, options in VARIANTS.items():
        root = tmp_path_factory.mktemp(f"ct2-{name}")
        if name == "separate":
            spm = _write_spm(root / "spm", [source, target])
            vocabs = fx.vocabulary(source, seed=2), fx.vocabulary(target, seed=3)
        else:
            spm = _write_spm(root / "spm", [shared])
            vocabs = fx.vocabulary(shared, seed=4), None
        options = {"quantization": "int8", **options}
        ct2 = fx.spec_ct2(root / "ct2", *vocabs, seed=5, **options)
        cases[name] = _imported(root, ct2, spm)
    return cases


# Models serialised by older CTranslate2 releases (scripts/old_ctranslate2_models.py): binary
# version 5 (2.24.0: special tokens as variables, sources ending in eos, .txt vocabularies)
# and 4 (1.20.1: TransformerSpec revision 3, one num_heads, encoder/embeddings unnumbered)
OLD = {"v5": "ctranslate2-2.24.0", "v4": "ctranslate2-1.20.1"}


@pytest.fixture(scope="session")
def old(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("ct2-old")
    spm = _write_spm(root / "spm", [fx.shared_spm()])
    data = Path(__file__).parent / "data"
    return {name: _imported(root / name, data / folder, spm) for name, folder in OLD.items()}


def _all(marian, onmt, variants, old) -> dict[str, Case]:
    out = {f"marian-{q}": c for q, c in marian.items()}
    out.update({f"onmt-{q}": c for q, c in onmt.items()})
    out.update(variants)
    out.update(old)
    return out


def _padded(rows: list[list[int]], pad: int = 0) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows])


def greedy_agreement(case: Case, texts: list[str]) -> list[tuple[list[str], list[str]]]:
    """(ours, CTranslate2's) greedy tokens of each text, up to the same length limit."""
    sources = case.sources(texts)
    limits = [len(s) + OFFSET for s in sources]
    with torch.no_grad():
        ours = greedy_decode(case.model, _padded(sources), max_len_offset=OFFSET).tolist()
    results = case.translator.translate_batch(
        case.pieces(texts), beam_size=1, min_decoding_length=0, max_input_length=0,
        max_decoding_length=max(limits), return_end_token=True,
    )  # fmt: skip
    theirs = [r.hypotheses[0][:limit] for r, limit in zip(results, limits, strict=True)]
    return [(case.tokens(o), t) for o, t in zip(ours, theirs, strict=True)]


def beam_agreement(case: Case, texts: list[str], beam: int = 4) -> list[bool]:
    """Whether our beam search's best equals CTranslate2's (length penalty 0 both)."""
    out = []
    for source, pieces in zip(case.sources(texts), case.pieces(texts), strict=True):
        with torch.no_grad():
            best = beam_decode(
                case.model, torch.tensor([source]), beam=beam, alpha=0.0, max_len_offset=OFFSET
            )[0][0]
        result = case.translator.translate_batch(
            [pieces], beam_size=beam, length_penalty=0.0, patience=1.0, min_decoding_length=0,
            max_input_length=0, max_decoding_length=len(source) + OFFSET, return_end_token=True,
        )[0]  # fmt: skip
        out.append(case.tokens(best.tokens) == result.hypotheses[0])
    return out


# -- model.bin ----------------------------------------------------------------------------------


def test_model_bin_is_read_as_ctranslate2_wrote_it(marian, onmt):
    bin_ = read_model_bin(marian["int8"].ct2 / "model.bin")
    assert (bin_.binary_version, bin_.spec, bin_.revision) == (6, "TransformerSpec", 7)
    assert bin_.variables["decoder/embeddings/weight"].dtype == torch.int8
    assert bin_.aliases["encoder/embeddings_0/weight"] == "decoder/embeddings/weight"
    float32 = read_variables(marian[None].ct2 / "model.bin")
    int8 = read_variables(bin_)
    assert int8.quantization == {"int8"} and float32.quantization == {"float32"}
    name = "decoder/layer_0/ffn/linear_0/weight"
    stored, scale = bin_.variables[name], bin_.variables[name + "_scale"]
    # CTranslate2's dequantization: each row times the reciprocal of its scale, in float32
    assert torch.equal(int8.weights[name], stored.float() * (1.0 / scale)[:, None])
    assert_close_to_scale(int8.weights[name], float32.weights[name], rel=1 / 127)
    # an alias reads as the variable it names, its int8 scale included
    assert torch.equal(
        int8.weights["encoder/embeddings_0/weight"], int8.weights["decoder/embeddings/weight"]
    )
    assert int8.flags["decoder/start_from_zero_embedding"] == 1
    half = read_variables(onmt["float16"].ct2 / "model.bin")
    assert half.quantization == {"float16"}
    assert all(t.dtype == torch.float32 for t in half.weights.values())


# -- decoding as CTranslate2 ------------------------------------------------------------------


@pytest.mark.parametrize("q", QUANTIZATIONS)
def test_marian_greedy_equals_ctranslate2(marian, q):
    pairs = greedy_agreement(marian[q], sentences(24))
    assert [o for o, _ in pairs] == [t for _, t in pairs]


@pytest.mark.parametrize("q", QUANTIZATIONS)
def test_prenorm_greedy_equals_ctranslate2(onmt, q):
    pairs = greedy_agreement(onmt[q], sentences(24))
    assert [o for o, _ in pairs] == [t for _, t in pairs]


@pytest.mark.parametrize("name", sorted(OLD))
def test_older_binary_versions_greedy_equals_ctranslate2(old, name):
    case = old[name]
    header = read_model_bin(case.ct2 / "model.bin")
    assert (header.binary_version, header.revision) == {"v5": (5, 4), "v4": (4, 3)}[name]
    assert case.model.config.source_eos == (name == "v5")  # with_source_eos, a variable
    pairs = greedy_agreement(case, sentences(24))
    assert [o for o, _ in pairs] == [t for _, t in pairs]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_greedy_equals_ctranslate2(variants, name):
    pairs = greedy_agreement(variants[name], sentences(24))
    assert [o for o, _ in pairs] == [t for _, t in pairs]


def test_beam_search_equals_ctranslate2(marian, onmt, variants, old):
    for name, case in _all(marian, onmt, variants, old).items():
        same = beam_agreement(case, sentences(6))
        assert all(same), f"{name}: {same}"


CASES = [f"marian-{q}" for q in QUANTIZATIONS] + [f"onmt-{q}" for q in QUANTIZATIONS]
CASES += sorted(VARIANTS) + sorted(OLD)


@pytest.mark.parametrize("name", CASES)
def test_log_probabilities_equal_ctranslate2s_scores(marian, onmt, variants, old, name):
    """Teacher-forced log-probabilities of random targets (every position read, whatever the
    model would choose) equal those of CTranslate2's score_batch."""
    case = _all(marian, onmt, variants, old)[name]
    texts = sentences(6)
    g = torch.Generator().manual_seed(0)
    pieces_of = dict(enumerate(case.tokenizer.targets))
    # random ids of the target's tokens (the others have a -inf logit: never produced)
    producible = torch.isfinite(case.model.unembed.bias).nonzero()[:, 0]
    targets_ours = [
        producible[torch.randint(len(producible), (12,), generator=g)].tolist() for _ in texts
    ]
    to_theirs = case.tokenizer.vocab_map.to_theirs
    targets = [[pieces_of[t] for t in to_theirs(ids)] for ids in targets_ours]
    scored = case.translator.score_batch(case.pieces(texts), targets, max_input_length=0)
    for source, ids, result in zip(case.sources(texts), targets_ours, scored, strict=True):
        ids = ids + [3]  # + eos
        with torch.no_grad():
            logits = case.model(torch.tensor([source]), torch.tensor([[2] + ids[:-1]]))[0]
        ours = torch.log_softmax(logits.double(), -1).gather(1, torch.tensor(ids)[:, None])[:, 0]
        assert_close_to_scale(ours, torch.tensor(result.log_probs, dtype=torch.float64), rel=1e-4)


def _fitting(case: Case, texts: list[str]) -> list[str]:
    """The texts whose source and translation fit CTranslate2's position table."""
    rows = case.model.config.max_len
    return [t for t, s in zip(texts, case.sources(texts), strict=True) if len(s) + OFFSET < rows]


@pytest.mark.slow
def test_the_bar_on_200_sentences(marian, onmt, variants, old):
    """Every model above on 200 test sentences: greedy equal on all, beam 4's best on 99%."""
    report = []
    for name, case in _all(marian, onmt, variants, old).items():
        texts = _fitting(case, sentences(200))
        pairs = greedy_agreement(case, texts)
        greedy = sum(o == t for o, t in pairs)
        beam = sum(beam_agreement(case, texts))
        ended = sum(t[-1:] == ["</s>"] for _, t in pairs)
        distinct = sum(len(set(t)) for _, t in pairs) / len(pairs)
        report.append(
            f"{name}: {len(texts)} sentences, greedy {greedy}, beam 4 {beam} (greedy outputs: "
            f"{ended} ended before their limit, {distinct:.1f} distinct tokens each)"
        )
        assert greedy == len(texts), report[-1]
        assert beam >= 0.99 * len(texts), report[-1]
    print("\n".join(report))


@pytest.mark.slow
@pytest.mark.parametrize("q", [None, "int8"])
def test_the_shipped_model_through_ctranslate2_and_back(shipped_copy, tmp_path, q):
    """A trained model: the shipped translator exported to CTranslate2 (its converter; float32
    and int8) and imported again decodes the 200 test sentences as CTranslate2 does."""
    from aiayn.interop.ctranslate2 import export_ctranslate2

    ct2 = tmp_path / "ct2"
    export_ctranslate2(shipped_copy, ct2, q)
    case = _imported(tmp_path, ct2, [ct2 / "sentencepiece.model"])
    texts = sentences(200)
    greedy = sum(o == t for o, t in greedy_agreement(case, texts))
    beam = sum(beam_agreement(case, texts))
    print(f"shipped model, {q or 'float32'}: greedy {greedy}, beam 4 {beam} of {len(texts)}")
    assert greedy == len(texts)
    assert beam >= 0.99 * len(texts)


# -- what the import holds ----------------------------------------------------------------------


def test_layouts_become_config_fields(marian, onmt, variants):
    m, o = marian[None].model.config, onmt[None].model.config
    assert (m.norm_first, m.pos_encoding, m.tie_embeddings, m.activation) == (
        False, "sinusoidal", "all", "swish",
    )  # fmt: skip
    assert (m.source_eos, m.max_len) == (False, 128)  # as TransformersConverter writes Marian
    assert (o.norm_first, o.pos_encoding, o.tie_embeddings, o.activation) == (
        True, "sinusoidal", "all", "relu",
    )  # fmt: skip
    assert marian["float16"].model.config.pos_encoding == "learned"  # a float16 table, kept
    s, p = variants["separate"].model.config, variants["post-norm"].model.config
    assert (s.pos_encoding, s.max_len, s.tie_embeddings, s.activation, s.source_eos) == (
        "learned", 1024, "decoder", "gelu", True,
    )  # fmt: skip
    assert s.layer_norm_eps == 1e-6
    assert (p.norm_first, p.pos_encoding, p.tie_embeddings, p.activation) == (
        False, "learned", "none", "gelu_tanh",
    )  # fmt: skip
    for name in ("bfloat16", "int16"):
        summary = json.loads((variants[name].ours / "imported.json").read_text())
        assert summary["weights"] == [name]
    notes = json.loads((variants["post-norm"].ours / "imported.json").read_text())["notes"]
    assert notes == ["the encoder and decoder embeddings are shared: imported as two copies"]


def test_separate_vocabularies_are_two_tables(variants):
    case = variants["separate"]
    config, tok = case.model.config, case.tokenizer
    assert tok.target is not None
    assert (config.src_vocab_size, config.tgt_vocab_size) == (
        tok.source_map.size, tok.vocab_map.size,
    )  # fmt: skip
    assert config.src_vocab_size != config.tgt_vocab_size
    # a piece the source vocabulary lacks (left out of it) reads as unk, as in CTranslate2
    texts = sentences(200)
    for pieces, ids in zip(case.pieces(texts), case.sources(texts), strict=True):
        missing = [i for i, p in enumerate(pieces) if p not in tok.source]
        if missing:
            assert [ids[i] for i in missing] == [1] * len(missing)  # aiayn's unk
            assert all(ids[i] != 1 for i in range(len(pieces)) if i not in missing)
            break
    else:
        pytest.fail("no test sentence holds a piece the source vocabulary lacks")


def test_int8_copy_of_an_import_loads_and_translates(onmt):
    import aiayn
    from aiayn.model.quantize import Int8Linear

    translator = aiayn.load(onmt[None].ours, quantize="int8")
    assert any(isinstance(m, Int8Linear) for m in translator.model.modules())
    assert len(translator.translate(sentences(2))) == 2


def test_run_json_keeps_the_metadata(tmp_path, onmt):
    metadata = {"from_code": "de", "to_code": "en", "package_version": "1.9", "target_prefix": ""}
    summary = import_ctranslate2(
        onmt[None].ct2, tmp_path / "out", tokenizer=onmt[None].spm[0], metadata=metadata
    )
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["data"] == {"task": "translation", "src_lang": "de", "tgt_lang": "en"}
    assert run["metadata"] == metadata and run["imported"] == summary


# -- Argos Translate packages ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["prenorm", "marian", "bpe"])
def test_argos_packages_decode_as_their_ctranslate2_models(argos_packages, tmp_path, kind):
    """The three packages of argos_fixtures (OpenNMT-py's converter; transformers' Marian with
    add_source_eos; Moses + BPE with separate .txt vocabularies), imported whole: greedy
    tokens of aiayn's model equal CTranslate2's on the package's own model."""
    from aiayn.interop.argos_package import opened_package

    summary = import_argos_package(argos_packages[kind], tmp_path / "ours")
    model, tok = load_model_and_tokenizer(tmp_path / "ours")
    texts = sentences(16, "de" if kind == "prenorm" else "en")
    ids, _ = source_ids(model, tok, texts)
    with torch.no_grad():
        ours = greedy_decode(model, _padded(ids), max_len_offset=OFFSET).tolist()
    with opened_package(argos_packages[kind]) as package:
        translator = ctranslate2.Translator(str(package.model_dir), compute_type="float32")
        pair = package.pair
        for text, source, out in zip(texts, ids, ours, strict=True):
            result = translator.translate_batch(
                [tok.pieces(text)], beam_size=1, min_decoding_length=0, max_input_length=0,
                max_decoding_length=len(source) + OFFSET,
            )[0]  # fmt: skip
            assert tok.target_pieces(out) == result.hypotheses[0], text
    run = json.loads((tmp_path / "ours" / "run.json").read_text())
    assert (run["data"]["src_lang"], run["data"]["tgt_lang"]) == pair
    assert summary["source"] == str(argos_packages[kind])
    assert summary["vocabularies"] == ("separate" if kind == "bpe" else "shared")


def test_a_txt_vocabulary_with_crlf_lines_reads_as_ctranslate2_reads_it(old, tmp_path):
    """CTranslate2 drops a carriage return that ends every line of a .txt vocabulary."""
    crlf = tmp_path / "crlf"
    shutil.copytree(old["v5"].ct2, crlf)
    vocab = crlf / "shared_vocabulary.txt"
    vocab.write_bytes(vocab.read_bytes().replace(b"\n", b"\r\n"))
    case = _imported(tmp_path, crlf, old["v5"].spm)
    assert case.tokenizer.source == old["v5"].tokenizer.source
    pairs = greedy_agreement(case, sentences(8))
    assert [o for o, _ in pairs] == [t for _, t in pairs]


# -- refusals ------------------------------------------------------------------------------------


def _refused(tmp_path, ct2: Path, spm: Path, *words: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(UserError) as e:
        import_ctranslate2(ct2, out, tokenizer=spm)
    for word in words:
        assert word in str(e.value)
    assert not out.exists()


def test_truncated_and_foreign_model_bins_are_refused(tmp_path, onmt, marian):
    source = onmt[None].ct2
    for cut in (2, 5, 300, (source / "model.bin").stat().st_size - 3):
        broken = tmp_path / f"cut{cut}"
        shutil.copytree(source, broken)
        data = (source / "model.bin").read_bytes()[:cut]
        (broken / "model.bin").write_bytes(data)
        _refused(tmp_path, broken, onmt[None].spm[0], str(broken / "model.bin"), "truncated")
    foreign = tmp_path / "foreign"
    shutil.copytree(source, foreign)
    shutil.copy(marian[None].ct2.parent / "hf" / "model.safetensors", foreign / "model.bin")
    _refused(tmp_path, foreign, onmt[None].spm[0], "not a CTranslate2 model.bin")


UNSUPPORTED = {
    "relative": (dict(with_relative_position=True), "relative_position_keys"),
    "glu": (dict(ffn_glu=True), "linear_0_noact"),
    "rms": (dict(rms_norm=True), "RMS normalisation"),
    "multi-query": (dict(multi_query_attention=True), "multi"),
    "no final norm": (dict(no_final_norm=True), "without a final LayerNorm"),
    "embedding norm": (dict(layernorm_embedding=True), "layernorm_embedding"),
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_options_aiayn_lacks_are_refused_by_name(tmp_path, onmt, name):
    options, word = UNSUPPORTED[name]
    vocab = fx.vocabulary(fx.shared_spm(), seed=1)
    ct2 = fx.spec_ct2(tmp_path / "ct2", vocab, spec_options=options, positions="computed")
    _refused(tmp_path, ct2, onmt[None].spm[0], word)


def test_another_activation_and_a_decoder_only_model_are_refused(tmp_path, onmt):
    vocab = fx.vocabulary(fx.shared_spm(), seed=1)
    ct2 = fx.spec_ct2(tmp_path / "sigmoid", vocab, activation="sigmoid")
    _refused(tmp_path, ct2, onmt[None].spm[0], "encoder/activation", "Sigmoid")
    lm = fx.decoder_only_ct2(tmp_path / "lm", vocab)
    _refused(tmp_path, lm, onmt[None].spm[0], "TransformerDecoderSpec", "decoder-only")


# -- the command line ------------------------------------------------------------------------


def test_aiayn_import_reads_a_ctranslate2_model_and_an_argos_package(
    marian, argos_packages, tmp_path, capsys
):
    import aiayn
    from aiayn.cli import main

    case = marian["int8"]
    out = tmp_path / "marian"
    args = ["import", str(case.ct2), "--out", str(out), "--tokenizer", *map(str, case.spm)]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "ctranslate2"
    translator = aiayn.load(out, engine="torch")
    for text in sentences(4):
        limit = len(case.sources([text])[0]) + OFFSET
        pieces = case.translator.translate_batch(
            case.pieces([text]), beam_size=1, min_decoding_length=0, max_input_length=0,
            max_decoding_length=limit,
        )[0].hypotheses[0]  # fmt: skip
        ids = case.tokenizer.encode_pieces(pieces, target=True)
        got = translator.translate([text], max_len_offset=OFFSET)[0].text
        assert got == case.tokenizer.decode([ids])[0]
    assert main(["import", str(argos_packages["marian"]), "--out", str(tmp_path / "a")]) == 0
    assert aiayn.load(tmp_path / "a", engine="torch").languages == ("en", "fr")


def test_aiayn_import_refuses_with_the_file_named(onmt, tmp_path, capsys):
    from aiayn.cli import main

    broken = tmp_path / "broken"
    shutil.copytree(onmt[None].ct2, broken)
    (broken / "model.bin").write_bytes((onmt[None].ct2 / "model.bin").read_bytes()[:1000])
    out = tmp_path / "out"
    assert (
        main(["import", str(broken), "--out", str(out), "--tokenizer", str(onmt[None].spm[0])]) == 2
    )
    err = capsys.readouterr().err
    assert str(broken / "model.bin") in err and "truncated" in err
    assert main(["import", str(broken), "--out", str(out)]) == 2  # no tokenizer beside it
    assert "--tokenizer" in capsys.readouterr().err
    hf = onmt[None].ct2  # a CTranslate2 model given three tokenizers
    spm = str(onmt[None].spm[0])
    assert main(["import", str(hf), "--out", str(out), "--tokenizer", spm, spm, spm]) == 2
    assert "one sentencepiece model, or a source and a target one" in capsys.readouterr().err
    assert not out.exists()
