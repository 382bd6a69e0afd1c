"""Bad input through the command line: one line on stderr naming what is wrong, a non-zero exit,
never a traceback (unless --debug); the wrong kind of model; numeric flags; text on stdin."""

import io
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

from aiayn import build_model
from aiayn.cli import main
from aiayn.config import ModelConfig, RunConfig
from aiayn.data.tokenizer import CharTokenizer
from aiayn.train.loop import save_trained_model

TEXT = "abcdefghijklmnopqrstuvwxyzäöüß ABCDEFGHIJKLMNOPQRSTUVWXYZ.,!?'0123456789"


def _save(directory, family, **config):
    tokenizer = CharTokenizer.train([TEXT])
    cfg = ModelConfig.preset(
        "tiny", family=family, vocab_size=tokenizer.vocab_size, max_len=32, **config
    )
    torch.manual_seed(0)
    extra = {"labels": ["neg", "pos"]} if config.get("n_classes") else {}
    save_trained_model(directory, build_model(cfg).eval(), tokenizer, RunConfig(), extra=extra)
    return directory


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {
        "tr": _save(root / "tr", "encoder-decoder"),
        "lm": _save(root / "lm", "decoder-only", n_encoder_layers=0),
        "cls": _save(root / "cls", "encoder-only", n_decoder_layers=0, n_classes=2),
    }


def stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def run_cli(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize(
    "command, model, args, holds, fits",
    [
        ("translate", "lm", [], "decoder-only", "aiayn generate"),
        ("translate", "cls", [], "encoder-only classifier", "aiayn classify"),
        ("evaluate", "cls", [], "encoder-only classifier", "aiayn classify"),
        ("attention", "lm", ["Hallo."], "decoder-only", "aiayn generate"),
        ("generate", "tr", [], "encoder-decoder", "aiayn translate"),
        ("classify", "tr", [], "encoder-decoder", "aiayn translate"),
        ("classify", "lm", [], "decoder-only", "aiayn generate"),
    ],
)
def test_the_wrong_kind_of_model_names_its_family_and_the_command_that_fits(
    dirs, capsys, monkeypatch, command, model, args, holds, fits
):
    stdin(monkeypatch, b"abc\n")
    code, _, err = run_cli(capsys, [command, str(dirs[model]), *args])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(dirs[model]) in err and holds in err and fits in err


@pytest.mark.parametrize(
    "argv, flag, allowed",
    [
        (["translate", "M", "--nbest", "0"], "--nbest", ">= 1"),
        (["translate", "M", "--nbest", "-1"], "--nbest", ">= 1"),
        (["translate", "M", "--chunk", "0"], "--chunk", ">= 1"),
        (["translate", "M", "--beam", "0"], "--beam", ">= 1"),
        (["translate", "M", "--beam", "two"], "--beam", "integer"),
        (["translate", "M", "--lenpen", "nan"], "--lenpen", "finite"),
        (["translate", "M", "--lenpen", "inf"], "--lenpen", "finite"),
        (["translate", "M", "--lenpen", "-0.5"], "--lenpen", ">= 0"),
        (["translate", "M", "--max-len-offset", "-5"], "--max-len-offset", ">= 0"),
        (["generate", "M", "--max-new-tokens", "-5"], "--max-new-tokens", ">= 0"),
        (["generate", "M", "--temperature", "nan"], "--temperature", "finite"),
        (["generate", "M", "--top-p", "0"], "--top-p", "(0.0, 1.0]"),
        (["generate", "M", "--top-p", "1.5"], "--top-p", "(0.0, 1.0]"),
        (["generate", "M", "--top-k", "-2"], "--top-k", ">= 0"),
        (["generate", "M", "--seed", "-1"], "--seed", "[0, "),
        (["evaluate", "M", "--limit", "-1"], "--limit", ">= 0"),
        (["evaluate", "M", "--samples", "-2"], "--samples", ">= 0"),
        (["average", "R", "--last", "0", "--out", "O"], "--last", ">= 1"),
    ],
)
def test_numeric_flags_are_checked_where_they_are_parsed(capsys, argv, flag, allowed):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and len(err.strip().splitlines()) == 1
    assert f"argument {flag}" in err and allowed in err


def test_nbest_above_beam_is_refused(dirs, capsys, monkeypatch):
    stdin(monkeypatch, b"abc\n")
    code, _, err = run_cli(capsys, ["translate", str(dirs["tr"]), "--beam", "2", "--nbest", "3"])
    assert code == 2 and "--nbest (3) cannot exceed --beam (2)" in err


def test_non_utf8_stdin_names_the_line_and_the_way_out(dirs, capsys, monkeypatch):
    stdin(monkeypatch, b"abc\nGr\xfc\xdfe\n")
    code, out, err = run_cli(capsys, ["translate", str(dirs["tr"])])
    assert code == 2 and "stdin, line 2: not UTF-8 (byte 0xfc at column 3)" in err
    assert "--errors replace" in err
    stdin(monkeypatch, b"abc\nGr\xfc\xdfe\n")
    code, out, err = run_cli(capsys, ["translate", str(dirs["tr"]), "--errors", "replace"])
    assert code == 0 and len(out.splitlines()) == 2
    stdin(monkeypatch, b"good\n\xff\n")
    code, _, err = run_cli(capsys, ["classify", str(dirs["cls"])])
    assert code == 2 and "stdin, line 2" in err


def test_crlf_input_is_read_as_lines(dirs, capsys, monkeypatch):
    stdin(monkeypatch, b"abc\r\nde\r\n")
    code, out, _ = run_cli(capsys, ["translate", str(dirs["tr"])])
    assert code == 0 and len(out.splitlines()) == 2 and "\r" not in out


def test_an_overlong_line_is_translated_in_part_with_a_warning(dirs, capsys, monkeypatch):
    stdin(monkeypatch, b"short\n" + b"a" * 100 + b"\n")
    code, out, err = run_cli(capsys, ["translate", str(dirs["tr"])])
    assert code == 0 and len(out.splitlines()) == 2
    assert "warning: stdin line 2: longer than the model's max_len (32 tokens)" in err


def test_characters_outside_the_vocabulary_are_named(dirs, capsys):
    argv = ["generate", str(dirs["lm"]), "--prompt", "ab☃c✈", "--max-new-tokens", "2"]
    code, _, err = run_cli(capsys, argv + ["--seed", "1"])
    assert code == 0 and "2 character(s) not in the model's vocabulary" in err and "'☃'" in err


def test_a_prompt_that_is_not_utf8_is_named(dirs, capsys):
    prompt = os.fsdecode(b"\xffab")  # what Python makes of such bytes in argv
    code, _, err = run_cli(capsys, ["generate", str(dirs["lm"]), "--prompt", prompt])
    assert code == 2 and "--prompt: the text is not UTF-8" in err


def test_debug_shows_the_traceback(dirs, monkeypatch, capsys):
    stdin(monkeypatch, b"abc\n")
    with pytest.raises(ValueError, match="decoder-only"):
        main(["translate", str(dirs["lm"]), "--debug"])
    with pytest.raises(ValueError, match="decoder-only"):
        main(["--debug", "translate", str(dirs["lm"])])


def test_an_unexpected_error_is_one_line_that_asks_for_debug(dirs, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise TypeError("something inside")

    monkeypatch.setattr("aiayn.infer.translate.translate", broken)
    stdin(monkeypatch, b"abc\n")
    code, _, err = run_cli(capsys, ["translate", str(dirs["tr"])])
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "internal error: TypeError: something inside" in err and "--debug" in err


def _cli(*args, **kwargs):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "aiayn.cli", *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **kwargs,
    )


def test_a_closed_pipe_ends_quietly_and_ctrl_c_is_one_line(dirs):
    proc = _cli("translate", dirs["tr"], "--chunk", "5", stdin=subprocess.PIPE)
    proc.stdout.close()  # the reader went away, as with `| head -1`
    _, err = proc.communicate(b"abc\n" * 200, timeout=120)
    assert err.decode() == "" and proc.returncode == 141
    proc = _cli("translate", dirs["tr"], "--chunk", "1", stdin=subprocess.PIPE)
    proc.stdin.write(b"abc\n")
    proc.stdin.flush()
    proc.stdout.readline()  # translated: now it waits for the next line
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.decode().strip() == "aiayn translate: interrupted"


def test_json_files_of_a_model_directory_are_named(dirs, tmp_path, capsys, monkeypatch):
    import shutil

    model = shutil.copytree(dirs["lm"], tmp_path / "lm")
    (model / "run.json").write_text("[1,")
    code, _, err = run_cli(capsys, ["generate", str(model), "--max-new-tokens", "2"])
    assert code == 2 and "run.json: not valid JSON" in err
    (model / "run.json").write_text(json.dumps({"data": 3}))
    code, _, err = run_cli(capsys, ["generate", str(model), "--max-new-tokens", "2"])
    assert code == 2 and "run.json: 'data' must be a JSON object" in err
    model = shutil.copytree(dirs["cls"], tmp_path / "cls")
    run = json.loads((model / "run.json").read_text())
    (model / "run.json").write_text(json.dumps({**run, "labels": ["only"]}))
    stdin(monkeypatch, b"good\n")
    code, _, err = run_cli(capsys, ["classify", str(model)])
    assert code == 2 and "1 labels, but the classifier has 2 classes" in err
