"""The loop of an Argos Translate / LibreTranslate user: a package imported, fine-tuned with
aiayn's loop (``train.init_from``, the package's tokenizer kept), exported again as a package
that Argos Translate installs and translates with.

What is written back is checked against CTranslate2 itself: the written model decodes as
aiayn's model does (greedy tokens equal, float32), in each layout of argos_fixtures'
packages (OpenNMT-py's pre-norm, Marian's post-norm, Moses + BPE with separate
vocabularies), also when fine-tuning has moved the row decoding starts from; and importing
it again gives the same model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from aiayn.data.tokenizer import BOS
from aiayn.infer.greedy import greedy_decode
from aiayn.infer.translate import source_ids
from aiayn.modeldir import load_model_and_tokenizer, save_model_dir
from tests.conftest import write_sample_corpus
from tests.interop.argos_fixtures import PAIRS, TEXT, argos_view, ding_lines
from tests.tolerance import assert_close_to_scale

ctranslate2 = pytest.importorskip("ctranslate2", reason="CTranslate2 writes and reads the model")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

OFFSET = 8  # tokens past the source's length a translation may run to


def _padded(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows])


def greedy_pairs(model_dir: Path, ct2_dir: Path, texts: list[str]):
    """(aiayn's greedy pieces, CTranslate2's on ``ct2_dir`` fed the tokenizer's pieces) per
    text, float32 both."""
    model, tok = load_model_and_tokenizer(model_dir)
    ids, _ = source_ids(model, tok, texts)
    with torch.no_grad():
        ours = greedy_decode(model, _padded(ids), max_len_offset=OFFSET).tolist()
    translator = ctranslate2.Translator(str(ct2_dir), compute_type="float32")
    results = translator.translate_batch(
        [tok.pieces(t) for t in texts], beam_size=1, min_decoding_length=0, max_input_length=0,
        max_decoding_length=max(len(s) for s in ids) + OFFSET,
    )  # fmt: skip
    limits = [len(s) + OFFSET for s in ids]
    return [
        (tok.target_pieces(o), r.hypotheses[0][:limit])
        for o, r, limit in zip(ours, results, limits, strict=True)
    ]


def imported(argos_packages, kind: str, out: Path) -> Path:
    from aiayn.interop.ctranslate2.importer import import_argos_package

    import_argos_package(argos_packages[kind], out)
    return out


def moved_start(model_dir: Path, seed: int = 0) -> None:
    """What fine-tuning does to the row decoding starts from: moves it."""
    model, _ = load_model_and_tokenizer(model_dir)
    with torch.no_grad():
        row = model.tgt_embed.token.weight[BOS]
        row.copy_(0.3 * torch.randn(row.shape, generator=torch.Generator().manual_seed(seed)))
    save_model_dir(model_dir, model)


@pytest.mark.parametrize("kind", ["prenorm", "marian", "bpe"])
def test_an_imported_package_is_written_back_in_its_own_layout(argos_packages, tmp_path, kind):
    from aiayn.interop.ctranslate2.reader import read_model_bin, read_variables
    from aiayn.interop.ctranslate2.writer import write_spec

    ours = imported(argos_packages, kind, tmp_path / "ours")
    record = write_spec(ours, tmp_path / "ct2")
    texts = ding_lines(TEXT[PAIRS[kind][0]], 16)
    for mine, theirs in greedy_pairs(ours, tmp_path / "ct2", texts):
        assert mine == theirs
    variables = read_variables(read_model_bin(tmp_path / "ct2" / "model.bin"))
    pre_norm = kind != "marian"
    assert bool(variables.flags["encoder/pre_norm"]) == pre_norm
    assert ("encoder/layer_norm/gamma" in variables.weights) == pre_norm  # the final LayerNorm
    vocabularies = sorted(p.name for p in (tmp_path / "ct2").glob("*_vocabulary.json"))
    shared = ["shared_vocabulary.json"]
    assert vocabularies == (shared if kind != "bpe" else ["source_vocabulary.json",
                                                          "target_vocabulary.json"])  # fmt: skip
    assert record["start"] == {"prenorm": "token", "marian": "zeros", "bpe": "token"}[kind]


@pytest.mark.parametrize("kind", ["marian", "prenorm"])
def test_a_moved_start_row_becomes_a_start_token_and_imports_back(argos_packages, tmp_path, kind):
    """Marian's conversion starts decoding from zeros (aiayn's extra bos row); once that row
    has moved it is a target token of its own, the decoder's start, never produced. The
    written model imports back as the same model (logits to float32 rounding)."""
    from aiayn.interop.ctranslate2.importer import import_ctranslate2
    from aiayn.interop.ctranslate2.writer import tokenizer_files, write_spec

    ours = imported(argos_packages, kind, tmp_path / "ours")
    moved_start(ours)
    record = write_spec(ours, tmp_path / "ct2")
    config = json.loads((tmp_path / "ct2" / "config.json").read_text())
    vocab = json.loads((tmp_path / "ct2" / "shared_vocabulary.json").read_text())
    _, tok = load_model_and_tokenizer(ours)
    if kind == "marian":  # no token had the row: one is added ("<s>" is a piece here)
        assert record["start"] == "added" and len(vocab) == len(tok.targets) + 1
        assert config["decoder_start_token"] == vocab[-1] not in tok.targets
    else:  # OpenNMT-py's start token "<s>" has the row already
        assert record["start"] == "token" and vocab == tok.targets
        assert config["decoder_start_token"] == "<s>"
    texts = ding_lines(TEXT[PAIRS[kind][0]], 16)
    for mine, theirs in greedy_pairs(ours, tmp_path / "ct2", texts):
        assert mine == theirs
        assert config["decoder_start_token"] not in theirs
    for name, data in tokenizer_files(tok).items():
        (tmp_path / "ct2" / name).write_bytes(data)
    import_ctranslate2(tmp_path / "ct2", tmp_path / "again")
    (model, tok), (again, tok2) = (load_model_and_tokenizer(p) for p in (ours, tmp_path / "again"))
    ids, _ = source_ids(model, tok, texts)
    assert source_ids(again, tok2, texts)[0] == ids
    assert tok2.vocab_size == tok.vocab_size
    g = torch.Generator().manual_seed(1)
    target = torch.randint(5, tok.vocab_size, (len(ids), 6), generator=g)
    target[:, 0] = BOS
    with torch.no_grad():  # the same ids, the same log-probabilities
        a, b = (m(_padded(ids), target).log_softmax(-1) for m in (model, again))
    produced = torch.isfinite(a)  # every id but the extra rows (-inf: never produced)
    assert torch.equal(produced, torch.isfinite(b))
    assert produced[..., BOS].any() == (kind == "prenorm")  # an added start: never produced
    assert_close_to_scale(b[produced], a[produced])


def finetune_config(corpus: Path, path: Path, pair: tuple[str, str]) -> Path:
    """A few steps of configs/finetune-libreoffice.toml's recipe on ``corpus``; no [model]:
    the architecture is train.init_from's."""
    path.write_text(
        f'[data]\ncorpus = "{corpus}"\nsrc_lang = "{pair[0]}"\ntgt_lang = "{pair[1]}"\n'
        'max_len = 48\n\n[train]\nmax_tokens = 300\nschedule = "linear"\nlr_scale = 1e-3\n'
        "warmup = 2\nmax_steps = 4\nthreads = 1\nlog_every = 1\ncheckpoint_every = 2\n"
        "valid_every = 4\n"
    )
    return path


def pair_corpus(directory: Path, pair: tuple[str, str]) -> Path:
    """A few Ding pairs as a corpus of ``pair`` (argos_fixtures' stand-ins: French and
    Spanish are German text)."""
    ding = write_sample_corpus(directory / "ding", n_train=60, n_valid=10, n_test=10)
    for split in ("train", "valid", "test"):
        for lang in pair:
            (directory / f"{split}.{lang}.gz").write_bytes(
                (ding / f"{split}.{TEXT[lang]}.gz").read_bytes()
            )
    return directory


@pytest.fixture(scope="module")
def finetuned(argos_packages, tmp_path_factory) -> dict:
    """Each package through the CLI chain: aiayn import, aiayn train with train.init_from on
    a few Ding pairs, aiayn export --format argos --quantize int8 (by kind, run once)."""
    from aiayn.cli import main

    done: dict[str, dict] = {}

    def chain(kind: str) -> dict:
        if kind not in done:
            root = tmp_path_factory.mktemp(f"argos-finetune-{kind}")
            ours, run, out = root / "imported", root / "run", root / "finetuned.argosmodel"
            assert main(["import", str(argos_packages[kind]), "--out", str(ours)]) == 0
            corpus = pair_corpus(root / "corpus", PAIRS[kind])
            config = finetune_config(corpus, root / "finetune.toml", PAIRS[kind])
            argv = ["train", str(config), "--out", str(run), "--set", f'train.init_from="{ours}"']
            assert main(argv) == 0
            argv = ["export", str(run / "model"), "--format", "argos", "--out", str(out)]
            assert main(argv + ["--quantize", "int8"]) == 0
            done[kind] = {"imported": ours, "run": run, "package": out}
        return done[kind]

    return chain


@pytest.mark.parametrize("kind", ["prenorm", "marian", "bpe"])
def test_the_cli_chain_fine_tunes_a_package_and_exports_one(finetuned, tmp_path, kind):
    from aiayn.interop.argos_package import read_package
    from aiayn.modeldir import ModelDir

    chain = finetuned(kind)
    ours, run = chain["imported"], chain["run"]
    tuned = ModelDir(run / "model")
    assert tuned.config == ModelDir(ours).config.replace(dropout=tuned.config.dropout)
    assert type(tuned.tokenizer()).__name__ == "ArgosTokenizer"
    tokenizer_file = "bpe.model" if kind == "bpe" else "sentencepiece.model"
    vocabularies = (
        ["source_vocabulary.json", "target_vocabulary.json", "source_vocab_map.json"]
        if kind == "bpe"
        else ["shared_vocabulary.json"]
    )
    for name in [tokenizer_file, "vocab_map.json", "argos_tokenizer.json", *vocabularies]:
        assert (run / "model" / name).read_bytes() == (ours / name).read_bytes(), name
    before, after = (ModelDir(d).model().state_dict() for d in (ours, run / "model"))
    assert any(not torch.equal(before[k], after[k]) for k in before)  # it learned
    package = read_package(chain["package"], tmp_path / "pk")
    assert package.pair == PAIRS[kind]
    assert package.tokenizer == tokenizer_file.split(".")[0]
    assert package.tokenizer_model.read_bytes() == (ours / tokenizer_file).read_bytes()
    assert package.sentence_splitter == "spacy"
    ct2_config = json.loads((package.model_dir / "config.json").read_text())
    framing = (ct2_config["add_source_bos"], ct2_config["add_source_eos"])
    assert framing == (False, kind == "marian")  # as the package framed its sources
    _, tok = load_model_and_tokenizer(run / "model")
    start = ct2_config["decoder_start_token"]  # Marian's zeros moved: a token of their own
    assert (start in tok.targets) == (kind != "marian")
    translator = ctranslate2.Translator(str(package.model_dir), compute_type="int8")
    results = translator.translate_batch(
        [tok.pieces(t) for t in ding_lines(TEXT[PAIRS[kind][0]], 4)]
    )
    assert all(r.hypotheses[0] for r in results)


@pytest.mark.slow
def test_argos_translate_installs_the_fine_tuned_package_and_translates_as_ctranslate2(
    finetuned, tmp_path
):
    """Argos Translate's own installer and translation (beam 4, length penalty 0.2, float32
    here) give what CTranslate2 gives on the package's model, read back by the tokenizer."""
    pytest.importorskip("argostranslate", reason="Argos Translate is the reference here")
    from aiayn.interop.argos_package import read_package

    chain = finetuned("prenorm")
    texts = ding_lines("de", 8)
    view = argos_view(
        tmp_path / "home", tmp_path / "packages", [chain["package"]], {"de-en": texts}
    )
    [seen] = view["packages"]
    assert (seen["from_code"], seen["to_code"]) == ("de", "en")
    assert (seen["tokenizer"], seen["splitter"]) == ("SentencePieceTokenizer", "spacy")
    package = read_package(chain["package"], tmp_path / "pk")
    _, tok = load_model_and_tokenizer(chain["run"] / "model")
    translator = ctranslate2.Translator(str(package.model_dir), compute_type="float32")
    results = translator.translate_batch(
        [tok.pieces(t) for t in texts], beam_size=4, length_penalty=0.2, replace_unknowns=True
    )
    decoded = [tok.cutter.decode(r.hypotheses[0]) for r in results]
    expected = [t[1:] if t.startswith(" ") else t for t in decoded]  # as Argos drops it
    assert view["translations"]["de-en"] == expected
