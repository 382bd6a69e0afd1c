"""End to end through the command line: prepare, train, translate, evaluate; and bad input."""

import io
import json
import shutil
from pathlib import Path

import pytest

from aiayn.cli import main
from tests.conftest import tiny_run_overrides


def sets(overrides):
    return [arg for o in overrides for arg in ("--set", o)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from tests.conftest import write_sample_corpus

    root = tmp_path_factory.mktemp("e2e")
    corpus = write_sample_corpus(root / "corpus")
    run = root / "run"
    argv = ["train", "--out", str(run), "--quiet"] + sets(tiny_run_overrides(corpus, max_steps=8))
    assert main(argv) == 0
    return corpus, run


def test_prepare_uses_the_bundled_corpus(capsys):
    assert main(["prepare", "ding-de-en"]) == 0
    out = capsys.readouterr().out
    assert "bundled corpus" in out
    assert json.loads(out[out.index("{") :])["pairs"]["test"] >= 1000


def test_translate_reads_stdin_keeps_order(trained, monkeypatch, capsys):
    _, run = trained
    lines = ["Das ist gut.", "", "Ich habe heute keine Zeit für dich, mein Freund."]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    assert main(["translate", str(run / "model")]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 3
    assert "sentences/s" in captured.err


def test_evaluate_reports_sacrebleu_and_chrf(trained, capsys, tmp_path):
    corpus, run = trained
    hyp = tmp_path / "hyp.txt"
    argv = ["evaluate", str(run / "model"), "--split", "test", "--output", str(hyp)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    result = json.loads(out[: out.index("}") + 1])
    assert result["sentences"] == 40 and 0 <= result["bleu"] <= 100
    # which weights were evaluated: the model directory and what its training said it holds
    assert result["model"] == str(run / "model")
    assert result["weights"] == "the last weights (step 8)"
    assert result["bleu_signature"].startswith("nrefs:1") and "tok:13a" in result["bleu_signature"]
    assert "nc:6" in result["chrf_signature"]  # chrF with character 6-grams
    assert len(hyp.read_text().splitlines()) == 40
    assert "hypothesis:" in out


def test_unknown_config_key_is_named(capsys, tmp_path):
    assert main(["train", "--out", str(tmp_path), "--set", "train.learning_rate=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown key(s) train.learning_rate" in err and "lr_scale" in err


def test_out_of_range_value_is_named(capsys, tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[model]\npreset = 'tiny'\ndropout = 1.5\n")
    assert main(["train", str(config), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "bad.toml" in err and "dropout must be in [0.0, 1.0)" in err
    assert not (tmp_path / "r").exists()  # nothing written


def test_changed_model_config_does_not_overwrite_a_run(trained, capsys):
    corpus, run = trained
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    argv = ["train", "--out", str(run), "--quiet"]
    argv += sets(tiny_run_overrides(corpus, max_steps=8) + ["model.d_ff=48"])
    assert main(argv) == 2
    assert "different [model] config" in capsys.readouterr().err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before


def test_model_directory_without_tokenizer_is_named(trained, capsys, tmp_path, monkeypatch):
    _, run = trained
    broken = tmp_path / "model"
    shutil.copytree(run / "model", broken)
    (broken / "tokenizer.model").unlink()
    monkeypatch.setattr("sys.stdin", io.StringIO("Hallo.\n"))
    assert main(["translate", str(broken)]) == 2
    assert "tokenizer.model: no tokenizer" in capsys.readouterr().err


def test_mismatched_parallel_files_are_named(capsys, tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    import gzip

    for split in ("train", "valid", "test"):
        (corpus / f"{split}.de.gz").write_bytes(gzip.compress(b"a\nb\nc\n"))
        (corpus / f"{split}.en.gz").write_bytes(gzip.compress(b"a\nb\n"))
    assert main(["train", "--out", str(tmp_path / "r"), "--set", f'data.corpus="{corpus}"']) == 2
    err = capsys.readouterr().err
    assert "train.de.gz" in err and "train.en.gz" in err and "3" in err and "2" in err


def test_prepare_files_imports_user_data(tmp_path, capsys):
    (tmp_path / "a.de").write_text("Hallo Welt.\nGuten Morgen.\n")
    (tmp_path / "a.en").write_text("Hello world.\nGood morning.\n")
    (tmp_path / "b.tsv").write_text("Danke.\tThanks.\n")
    out = tmp_path / "corpus"
    argv = ["prepare", "files", "--out", str(out)]
    argv += ["--split", f"train={tmp_path / 'a.de'},{tmp_path / 'a.en'}"]
    argv += ["--split", f"valid={tmp_path / 'b.tsv'}"]
    assert main(argv) == 0
    from aiayn.data.files import load_split

    assert load_split(out, "train") == [
        ("Hallo Welt.", "Hello world."),
        ("Guten Morgen.", "Good morning."),
    ]
    assert load_split(out, "valid") == [("Danke.", "Thanks.")]
    (tmp_path / "c.jsonl").write_text('{"translation": {"de": "Ja.", "en": "Yes."}}\n')
    argv = ["prepare", "files", "--out", str(out), "--split", f"test={tmp_path / 'c.jsonl'}"]
    assert main(argv) == 0
    assert load_split(out, "test") == [("Ja.", "Yes.")]
    (tmp_path / "bad.tsv").write_text("no tab here\n")
    assert (
        main(["prepare", "files", "--out", str(out), "--split", f"test={tmp_path / 'bad.tsv'}"])
        == 2
    )
    assert "bad.tsv" in capsys.readouterr().err


def test_translate_with_beam_and_nbest(trained, monkeypatch, capsys):
    _, run = trained
    monkeypatch.setattr("sys.stdin", io.StringIO("Das ist gut.\nIch komme morgen.\n"))
    assert main(["translate", str(run / "model"), "--beam", "3", "--nbest", "2"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "1", "1"]
    assert float(rows[0][1]) >= float(rows[1][1])  # best first
    monkeypatch.setattr("sys.stdin", io.StringIO("Das ist gut.\n"))
    assert main(["translate", str(run / "model"), "--beam", "2", "--nbest", "3"]) == 2
    assert "--nbest (3) cannot exceed --beam (2)" in capsys.readouterr().err


def test_average_writes_a_model_directory(trained, tmp_path, capsys):
    _, run = trained
    out = tmp_path / "avg"
    assert main(["average", str(run), "--last", "2", "--out", str(out)]) == 0
    assert f"wrote {out}: the average of 2 checkpoints (steps" in capsys.readouterr().out
    from aiayn.modeldir import load_model_dir

    assert load_model_dir(out).config.d_model == 32
    assert (out / "tokenizer.model").is_file()
    half = tmp_path / "half"
    assert main(["average", str(run), "--last", "1", "--out", str(half), "--fp16"]) == 0
    size = lambda d: (d / "model.safetensors").stat().st_size  # noqa: E731
    assert size(half) < 0.6 * size(out)


def test_average_force_replaces_another_model_whole(trained, tmp_path, capsys):
    import torch

    from aiayn import build_model
    from aiayn.config import ModelConfig, RunConfig
    from aiayn.data.tokenizer import CharTokenizer
    from aiayn.modeldir import load_model_and_tokenizer, save_trained_model

    _, run = trained
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    chars = CharTokenizer.train(["abc"])  # another model, with another kind of tokenizer
    other = build_model(ModelConfig.preset("tiny", vocab_size=chars.vocab_size))
    save_trained_model(out, other, chars, RunConfig())
    assert main(["average", str(run), "--last", "2", "--out", str(out), "--force"]) == 0
    assert main(["average", str(run), "--last", "2", "--out", str(fresh)]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in fresh.iterdir())
    model, _ = load_model_and_tokenizer(out)  # one tokenizer: the run's
    for name, t in load_model_and_tokenizer(fresh)[0].state_dict().items():
        assert torch.equal(model.state_dict()[name], t), name


def test_a_read_only_out_is_named_by_average_quantize_and_export(
    trained, tmp_path, capsys, monkeypatch
):
    import errno
    import os

    _, run = trained
    old = tmp_path / "old"
    assert main(["average", str(run), "--last", "1", "--out", str(old)]) == 0
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    mkdir = os.mkdir

    def read_only(path, *args, **kwargs):  # tmp_path as a read-only file system
        if tmp_path in Path(path).parents:
            raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(path))
        return mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", read_only)
    commands = [
        ["average", str(run), "--last", "1", "--out", str(old), "--force"],
        ["average", str(run), "--last", "1", "--out", str(tmp_path / "a" / "avg")],
        ["quantize", str(run / "model"), "--out", str(tmp_path / "int8")],
        ["export", str(run / "model"), "--out", str(tmp_path / "hf")],
    ]
    capsys.readouterr()
    for argv in commands:
        assert main(argv) == 2, argv
        out = argv[argv.index("--out") + 1]
        err = capsys.readouterr().err
        assert err == f"aiayn {argv[0]}: error: cannot write {out}: Read-only file system\n"
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]  # nothing half-written


def test_attention_writes_heatmaps(trained, tmp_path, capsys):
    _, run = trained
    png = tmp_path / "attn.png"
    assert main(["attention", str(run / "model"), "Das ist gut.", "--out", str(png), "--self"]) == 0
    for p in (png, tmp_path / "attn-encoder.png", tmp_path / "attn-decoder.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quantize_writes_an_int8_model_that_translates(trained, monkeypatch, capsys, tmp_path):
    _, run = trained
    out = tmp_path / "int8"
    assert main(["quantize", str(run / "model"), "--out", str(out)]) == 0
    assert "wrote int8 model" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["quantization"]["method"] == "int8"
    assert (out / "tokenizer.model").is_file()
    lines = ["Das ist gut.", "Ich habe heute keine Zeit."]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    assert main(["translate", str(out)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main(["quantize", str(out), "--out", str(tmp_path / "again")]) == 2
    assert "already quantized" in capsys.readouterr().err
    before = (out / "model.safetensors").read_bytes()
    assert main(["quantize", str(run / "model"), "--out", str(out), "--keep-output-float"]) == 2
    assert "exists and is not empty; choose another or add --force" in capsys.readouterr().err
    assert (out / "model.safetensors").read_bytes() == before
    assert (
        main(["quantize", str(run / "model"), "--out", str(out), "--keep-output-float", "--force"])
        == 0
    )
    assert json.loads((out / "config.json").read_text())["quantization"]["include_output"] is False
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO("Das ist gut.\n"))
    assert main(["translate", str(run / "model"), "--quantize", "int8"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def evaluated_weights(directory, capsys, tmp_path) -> str:
    """The ``weights`` line ``aiayn evaluate`` prints for ``directory`` (two test sentences)."""
    hyp = tmp_path / f"{directory.name}.hyp.txt"
    argv = ["evaluate", str(directory), "--limit", "2", "--samples", "0", "--output", str(hyp)]
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)["weights"]


def test_evaluate_names_the_weights_of_best(trained, capsys, tmp_path):
    _, run = trained
    records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    best = [r for r in records if r.get("best")][-1]
    assert evaluated_weights(run / "best", capsys, tmp_path) == (
        f"the weights of the best validation (step {best['step']}, valid loss "
        f"{best['valid_loss']:.4g})"
    )


def test_evaluate_names_the_checkpoints_an_average_holds(trained, capsys, tmp_path):
    _, run = trained
    out = tmp_path / "avg"
    assert main(["average", str(run), "--last", "2", "--out", str(out), "--fp16"]) == 0
    expected = f"the average of 2 checkpoints (steps 5, 8) of {run}, stored in float16"
    assert capsys.readouterr().out == f"wrote {out}: {expected}\n"
    assert json.loads((out / "run.json").read_text())["weights"] == {
        "kind": "average",
        "run": str(run),
        "checkpoints": [
            {"file": "checkpoint-00000005.pt", "step": 5},
            {"file": "checkpoint-00000008.pt", "step": 8},
        ],
        "dtype": "float16",
    }
    assert evaluated_weights(out, capsys, tmp_path) == expected


def test_evaluate_names_the_weights_of_an_int8_copy(trained, capsys, tmp_path):
    _, run = trained
    out = tmp_path / "int8"
    assert main(["quantize", str(run / "model"), "--out", str(out)]) == 0
    record = json.loads((out / "run.json").read_text())["weights"]
    assert record == {
        "kind": "last",
        "step": 8,
        "quantized": {"method": "int8", "include_output": True},
        "from": str(run / "model"),
    }
    assert (
        evaluated_weights(out, capsys, tmp_path) == "the last weights (step 8), quantized to int8"
    )
    # quantized as it loads, the float directory says so too
    hyp = tmp_path / "q.txt"
    argv = ["evaluate", str(run / "model"), "--limit", "2", "--samples", "0", "--quantize", "int8"]
    assert main([*argv, "--output", str(hyp)]) == 0
    assert json.loads(capsys.readouterr().out)["weights"] == (
        "the last weights (step 8), quantized to int8 as they loaded (--quantize)"
    )


def test_evaluate_names_the_weights_of_the_shipped_model(shipped_copy, capsys, tmp_path):
    from tests.conftest import REPO_ROOT

    assert evaluated_weights(shipped_copy, capsys, tmp_path) == (
        "the average of 5 checkpoints (steps 14400, 14800, 15200, 15600, 16000) of "
        "runs/ding-de-en, stored in float16"
    )
    made = json.loads((shipped_copy / "run.json").read_text())["made"]  # and how it was made
    assert (REPO_ROOT / made["config"]).is_file() and made["steps"] == 16000
    metrics = [json.loads(line) for line in (shipped_copy / "metrics.jsonl").open()]
    assert made["train_minutes"] == round(metrics[-2]["elapsed_s"] / 60, 1)


def test_a_rerun_after_a_divergence_resumes_from_the_last_good_checkpoint(tmp_path, capsys):
    """A few good steps, then the same run directory with a learning rate 100,000 times the
    config's: the run stops; run again with the config's rate, it resumes from the last
    checkpoint saved before the loss left the range, never from one saved after."""
    from aiayn.train import checkpoint as ckpt
    from tests.conftest import write_sample_corpus

    corpus = write_sample_corpus(tmp_path / "corpus")
    run, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"

    def train(max_steps, **settings):
        overrides = tiny_run_overrides(corpus, max_steps=max_steps, **settings)
        return main(["train", "--out", str(run), "--quiet", *sets(overrides)])

    assert train(20) == 0
    capsys.readouterr()
    assert train(40, lr_scale=100000) == 2
    err = capsys.readouterr().err
    good = checkpoints / "checkpoint-00000020.pt"
    assert "stops" in err and f"Last good checkpoint: {good} (the next run in {run} resumes" in err
    aside = ckpt.list_diverged(checkpoints)
    assert aside and all(ckpt.checkpoint_step(p) > 20 for p in aside)
    assert "checkpoint-00000025.pt" in err.split("set aside")[1]  # named as set aside
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(checkpoints)][-1] == 20

    # averaging skips them, and says so, unless asked
    assert main(["average", str(run), "--last", "2", "--out", str(tmp_path / "avg")]) == 0
    captured = capsys.readouterr()
    assert "steps 15, 20" in captured.out
    assert "skipped" in captured.err and "checkpoint-00000025.diverged.pt" in captured.err
    argv = [
        "average",
        str(run),
        "--last",
        "2",
        "--out",
        str(tmp_path / "all"),
        "--include-diverged",
    ]
    assert main(argv) == 0
    last_two = [ckpt.checkpoint_step(p) for p in sorted([good, *aside], key=ckpt.checkpoint_step)]
    assert f"steps {last_two[-2]}, {last_two[-1]}" in capsys.readouterr().out
    record = json.loads((tmp_path / "all" / "run.json").read_text())["weights"]
    assert record["checkpoints"][-1]["diverged"] is True

    assert train(30) == 0  # the config's learning rate again
    err = capsys.readouterr().err
    assert f"resuming from {good}, the last good checkpoint" in err
    records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    resumed = [r for r in records if r.get("event") == "resume"]
    assert resumed[-1] == {"event": "resume", "step": 20, "checkpoint": good.name}
    assert not ckpt.list_diverged(checkpoints)  # that attempt's checkpoints are gone
    assert json.loads((run / "model" / "run.json").read_text())["weights"]["step"] == 30
