"""--force replaces a model directory whole: after import, export or quantize over another
model, the directory holds exactly what writing into an empty one gives, and loaders (aiayn's,
transformers' AutoTokenizer) find the new model's files, never a stale one."""

import json

import pytest
import torch

from aiayn import build_model
from aiayn.cli import main
from aiayn.config import ModelConfig, RunConfig
from aiayn.data.tokenizer import CharTokenizer
from aiayn.modeldir import load_model_and_tokenizer, save_trained_model
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.interop.hf_fixtures import bert_model, bert_tokenizer, marian_model, marian_tokenizer

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    bert_tokenizer(root / "bert")
    bert_model(root / "bert")  # a classifier: its import writes run.json (labels)
    marian_model(root / "marian", marian_tokenizer(root / "marian"))
    tokenizer = CharTokenizer.train(["abcdefghijklmnopqrstuvwxyz .,ABCDEFGHIJKLMNOPQRSTUVWXYZ"])
    config = ModelConfig.preset("tiny", vocab_size=tokenizer.vocab_size, max_len=32)
    torch.manual_seed(0)
    save_trained_model(root / "native", build_model(config).eval(), tokenizer, RunConfig())
    return root


def files(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def cli(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 0, err
    return code


def test_import_force_over_another_model_leaves_none_of_its_files(sources, tmp_path, capsys):
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    cli(capsys, ["import", str(sources / "bert"), "--out", str(out)])
    assert (out / "run.json").is_file() and (out / "tokenizer.json").is_file()
    cli(capsys, ["import", str(sources / "marian"), "--out", str(out), "--force"])
    cli(capsys, ["import", str(sources / "marian"), "--out", str(fresh)])
    assert files(out).keys() == files(fresh).keys()  # no run.json, no tokenizer.json
    assert "run.json" not in files(out) and "tokenizer.json" not in files(out)
    model, tokenizer = load_model_and_tokenizer(out)
    assert (
        model.config.family == "encoder-decoder" and tokenizer.vocab_size == model.config.vocab_size
    )


def test_import_force_over_a_native_model_drops_its_run_json(sources, tmp_path, capsys):
    out = tmp_path / "out"
    cli(capsys, ["quantize", str(sources / "native"), "--out", str(out)])
    assert (out / "run.json").is_file()
    cli(capsys, ["import", str(sources / "bert"), "--out", str(out), "--force"])
    assert json.loads((out / "run.json").read_text()) == {"labels": ["neg", "neutral", "pos"]}
    cli(capsys, ["import", str(sources / "marian"), "--out", str(out), "--force"])
    assert not (out / "run.json").exists()


def test_export_force_over_a_bert_export_gives_autotokenizer_the_new_vocabulary(
    sources, tmp_path, capsys
):
    ours_bert, ours_marian = tmp_path / "bert", tmp_path / "marian"
    cli(capsys, ["import", str(sources / "bert"), "--out", str(ours_bert)])
    cli(capsys, ["import", str(sources / "marian"), "--out", str(ours_marian)])
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    cli(capsys, ["export", str(ours_bert), "--out", str(out)])
    cli(capsys, ["export", str(ours_marian), "--out", str(out), "--force"])
    cli(capsys, ["export", str(ours_marian), "--out", str(fresh)])
    assert files(out) == files(fresh)
    reference = transformers.AutoTokenizer.from_pretrained(sources / "marian")
    got = transformers.AutoTokenizer.from_pretrained(out)
    assert len(got) == len(reference)
    text = ["Das Haus ist groß."]
    assert got(text)["input_ids"] == reference(text)["input_ids"]


def test_quantize_force_over_an_imported_bert_keeps_no_vocab_map(sources, tmp_path, capsys):
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    cli(capsys, ["import", str(sources / "bert"), "--out", str(out)])
    assert (out / "vocab_map.json").is_file()
    cli(capsys, ["quantize", str(sources / "native"), "--out", str(out), "--force"])
    cli(capsys, ["quantize", str(sources / "native"), "--out", str(fresh)])
    assert files(out) == files(fresh)
    model, tokenizer = load_model_and_tokenizer(out)
    assert model.quantization["method"] == "int8"
    assert type(tokenizer) is type(load_tokenizer(sources / "native"))


def test_a_write_failing_midway_leaves_the_old_model(sources, tmp_path, capsys, monkeypatch):
    import aiayn.interop.hf as hf
    from aiayn.errors import UserError

    out = tmp_path / "out"
    cli(capsys, ["import", str(sources / "bert"), "--out", str(out)])
    before = files(out)
    write_json = hf.write_json

    def full_disk(path, data):
        if path.name == "imported.json":  # the last file: the weights are written by then
            raise UserError(f"cannot write {path}: No space left on device")
        write_json(path, data)

    monkeypatch.setattr(hf, "write_json", full_disk)
    assert main(["import", str(sources / "marian"), "--out", str(out), "--force"]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
