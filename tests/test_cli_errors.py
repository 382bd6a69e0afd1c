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
from aiayn.modeldir import save_trained_model
from tests.tolerance import assert_close_to_scale

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
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"argument {flag}" in err and allowed in err


def test_generate_with_a_tiny_top_p_is_greedy(dirs, capsys):
    base = ["generate", str(dirs["lm"]), "--prompt", "abc", "--max-new-tokens", "8"]
    code, greedy, err = run_cli(capsys, [*base, "--top-k", "1", "--seed", "0"])
    assert code == 0, err
    code, out, err = run_cli(capsys, [*base, "--top-p", "5e-324", "--seed", "0"])
    assert code == 0, err
    assert out == greedy


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


def test_embed_names_a_non_utf8_line_and_takes_errors_as_its_siblings_do(dirs, capsys, monkeypatch):
    stdin(monkeypatch, b"abc\nGr\xfc\xdfe\n")
    code, out, err = run_cli(capsys, ["embed", str(dirs["cls"])])
    assert code == 2 and "stdin, line 2: not UTF-8 (byte 0xfc at column 3)" in err
    assert "--errors replace" in err and "internal error" not in err
    for errors in ("replace", "ignore"):
        stdin(monkeypatch, b"abc\r\nGr\xfc\xdfe\n")
        code, out, err = run_cli(capsys, ["embed", str(dirs["cls"]), "--errors", errors])
        assert code == 0, err
        vectors = [json.loads(line) for line in out.splitlines()]
        assert len(vectors) == 2 and len(vectors[0]) == 32


def test_an_empty_line_translates_to_an_empty_line(dirs, capsys, monkeypatch):
    stdin(monkeypatch, b"abc\n\n   \nxyz\n")
    code, out, err = run_cli(capsys, ["translate", str(dirs["tr"])])
    assert code == 0, err
    lines = out.split("\n")
    assert len(lines) == 5 and lines[1] == "" and lines[2] == "" and lines[4] == ""


def test_classifying_an_empty_line_is_refused_naming_it(dirs, capsys, monkeypatch):
    stdin(monkeypatch, b"abc\n\nxyz\n")
    code, out, err = run_cli(capsys, ["classify", str(dirs["cls"])])
    assert code == 2 and "text 2 is empty: there is nothing to classify" in err


def test_an_empty_line_embeds_as_the_empty_text_does_alone(dirs, capsys, monkeypatch):
    stdin(monkeypatch, b"abc\n\nxyz\n")
    code, out, err = run_cli(capsys, ["embed", str(dirs["cls"])])
    assert code == 0, err
    stdin(monkeypatch, b"\n")
    alone = json.loads(run_cli(capsys, ["embed", str(dirs["cls"])])[1])
    batched = json.loads(out.splitlines()[1])
    assert_close_to_scale(torch.tensor(batched), torch.tensor(alone))  # padding: rounding only


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

    monkeypatch.setattr("aiayn.infer.translate.translate_texts", broken)
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


# --------------------------------------------------------------------------- disk and permissions


def _limited(max_bytes):
    """In the child: files may not grow past ``max_bytes`` (a full disk, for one process)."""
    import resource

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return limit


def test_a_full_disk_names_the_file_and_leaves_no_half_file(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code = (
        "import sys; from aiayn import build_model, ModelConfig\n"
        "from aiayn.modeldir import save_model_dir; from aiayn.errors import UserError\n"
        "try: save_model_dir(sys.argv[1], build_model(ModelConfig.preset('tiny')))\n"
        "except UserError as e: print(e); sys.exit(2)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m")],
        env=env,
        capture_output=True,
        preexec_fn=_limited(100_000),
    )
    assert done.returncode == 2, done.stderr
    assert b"cannot write " in done.stdout and b"model.safetensors: File too large" in done.stdout
    assert [p.name for p in (tmp_path / "m").iterdir()] == []  # no temporary file left


def test_a_checkpoint_that_does_not_fit_on_the_disk_is_named(tmp_path):
    from tests.conftest import tiny_run_overrides, write_sample_corpus

    corpus = write_sample_corpus(tmp_path / "corpus", n_valid=10, n_test=10)
    argv = ["train", "--out", str(tmp_path / "run"), "--quiet"]
    for o in tiny_run_overrides(corpus, max_steps=6, checkpoint_every=3):
        argv += ["--set", o]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "aiayn.cli", *argv],
        env=env,
        capture_output=True,
        preexec_fn=_limited(200_000),  # the tokenizer and logs fit, a checkpoint does not
    )
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err
    assert "cannot write " in err and "checkpoint-00000003.pt: File too large" in err
    assert not list((tmp_path / "run").rglob("*.tmp"))
    assert not (tmp_path / "run" / "train.lock").exists()


def test_a_directory_without_write_permission_is_named(dirs, tmp_path, capsys, monkeypatch):
    import tempfile

    def denied(*args, dir=None, **kwargs):
        raise PermissionError(13, "Permission denied", str(dir))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    code, _, err = run_cli(
        capsys, ["attention", str(dirs["tr"]), "abc", "--out", str(tmp_path / "a.png")]
    )
    assert code == 2 and f"cannot write {tmp_path / 'a.png'}: Permission denied" in err
    code, _, err = run_cli(capsys, ["average", str(tmp_path), "--out", str(dirs["tr"])])
    assert code == 2 and "exists and is not empty; choose another or add --force" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_named(dirs, tmp_path, capsys):
    tmp_path.chmod(0o555)
    try:
        code, _, err = run_cli(
            capsys, ["attention", str(dirs["tr"]), "ab", "--out", str(tmp_path / "a.png")]
        )
    finally:
        tmp_path.chmod(0o755)
    assert code == 2 and "a.png: Permission denied" in err


def test_attention_works_with_a_character_model(dirs, tmp_path, capsys):
    code, out, _ = run_cli(
        capsys, ["attention", str(dirs["tr"]), "abc", "--out", str(tmp_path / "a.png")]
    )
    assert code == 0 and (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------------- preparing data


def test_prepare_files_keeps_an_existing_corpus_unless_forced(tmp_path, capsys):
    from aiayn.data.files import load_split

    (tmp_path / "a.de").write_text("Ja.\n")
    (tmp_path / "a.en").write_text("Yes.\n")
    (tmp_path / "b.tsv").write_text("Nein.\tNo.\n")
    out = tmp_path / "corpus"
    split = f"train={tmp_path / 'a.de'},{tmp_path / 'a.en'}"
    assert run_cli(capsys, ["prepare", "files", "--out", str(out), "--split", split])[0] == 0
    before = (out / "train.de.gz").read_bytes()
    replace = ["prepare", "files", "--out", str(out), "--split", f"train={tmp_path / 'b.tsv'}"]
    code, _, err = run_cli(capsys, replace)
    assert code == 2 and "already holds train.de.gz, train.en.gz; add --force" in err
    assert (out / "train.de.gz").read_bytes() == before
    add = ["prepare", "files", "--out", str(out), "--split", f"valid={tmp_path / 'b.tsv'}"]
    assert run_cli(capsys, add)[0] == 0  # a new split joins the corpus
    assert json.loads((out / "stats.json").read_text())["pairs"] == {"train": 1, "valid": 1}
    assert run_cli(capsys, [*replace, "--force"])[0] == 0
    assert load_split(out, "train") == [("Nein.", "No.")]


@pytest.mark.parametrize(
    "lines, extra, message",
    [
        (b"\n \n", [], "no sentence pairs"),
        (b"Ja.\n", ["--split", "train=T"], "--split train is given twice"),
        (b"Ja.\n", ["--tgt-lang", "de"], "--src-lang and --tgt-lang are both 'de'"),
        (b"Ja.\n", ["--source", "x"], "--source is for the bundled corpora"),
    ],
)
def test_prepare_files_refuses_what_cannot_make_a_corpus(tmp_path, capsys, lines, extra, message):
    (tmp_path / "a.tsv").write_bytes(lines.replace(b"\n", b"\tx\n") if lines.strip() else lines)
    split = f"train={tmp_path / 'a.tsv'}"
    extra = [split if x == "train=T" else x for x in extra]
    code, _, err = run_cli(
        capsys, ["prepare", "files", "--out", str(tmp_path / "c"), "--split", split, *extra]
    )
    last = err.strip().splitlines()[-1]  # (a warning about blank lines may come first)
    assert code == 2 and last.startswith("aiayn prepare: error: ") and message in last
    assert not (tmp_path / "c").exists()


def test_a_max_len_that_drops_every_pair_is_named(tmp_path, capsys):
    from tests.conftest import tiny_run_overrides, write_sample_corpus

    corpus = write_sample_corpus(tmp_path / "corpus", n_valid=10, n_test=10)
    argv = ["train", "--out", str(tmp_path / "run"), "--quiet"]
    for o in tiny_run_overrides(corpus, max_steps=2) + ["data.max_len=2"]:
        argv += ["--set", o]
    code, _, err = run_cli(capsys, argv)
    assert code == 2 and "every one of the 400 train pairs is longer than data.max_len = 2" in err


def test_a_bundled_corpus_source_that_cannot_be_read_is_named(tmp_path, capsys):
    (tmp_path / "book.txt").write_bytes("Call me Ishmael.\nGrüße.\n".encode("latin-1"))
    (tmp_path / "book.tgz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    (tmp_path / "rt.whl").write_bytes(b"PK\x03\x04broken")
    (tmp_path / "rt.csv.bz2").write_bytes(b"BZh9garbage")
    for corpus, source, message in (
        ("moby-dick", "book.txt", "book.txt, line 2: not UTF-8 (byte 0xfc at column 3)"),
        ("moby-dick", "book.tgz", "book.tgz: not a readable Moby Dick source"),
        ("rotten-tomatoes", "rt.whl", "rt.whl: not a readable Rotten Tomatoes source"),
        ("rotten-tomatoes", "rt.csv.bz2", "rt.csv.bz2: not a readable Rotten Tomatoes source"),
    ):
        argv = ["prepare", corpus, "--out", str(tmp_path / "c"), "--source", str(tmp_path / source)]
        code, _, err = run_cli(capsys, argv)
        assert code == 2 and message in err, err


def test_generate_stops_before_a_stop_text(dirs, capsys):
    argv = ["generate", str(dirs["lm"]), "--prompt", "ab", "--temperature", "0"]
    code, whole, _ = run_cli(capsys, [*argv, "--max-new-tokens", "30"])
    assert code == 0 and whole.startswith("ab")
    continuation = whole.rstrip("\n")[2:]
    stop = continuation[5:7]  # met after the fifth character, perhaps before too
    code, out, _ = run_cli(capsys, [*argv, "--max-new-tokens", "30", "--stop", stop])
    assert code == 0 and out.rstrip("\n") == "ab" + continuation[: continuation.find(stop)]
    code, _, err = run_cli(capsys, [*argv, "--stop", ""])
    assert code == 2 and "stop" in err
