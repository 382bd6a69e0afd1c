"""The ctranslate2 engine's cache and limits, as a user meets them: long inputs through the
command line and the server (the torch engine's answers), a damaged cache converted again
(every kind of damage, float32 and int8), a conversion that does not load, a cache directory a
user places (argument, flag, environment, the user's cache for a read-only model), processes
converting at once, and a conversion that prints one line of aiayn's own."""

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from aiayn.cli import main
from aiayn.errors import UserError
from aiayn.model import build_model
from aiayn.modeldir import save_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.conftest import REPO_ROOT

pytest.importorskip("ctranslate2", reason="CTranslate2 is not installed (aiayn[ctranslate2])")
pytest.importorskip("transformers", reason="CTranslate2's converter needs transformers")

from aiayn.interop.ctranslate2 import (  # noqa: E402
    CACHE_DIR,
    CACHE_ENV,
    STAMP,
    CTranslate2Engine,
    cached_model,
    conversion_inputs,
    damage,
    file_digests,
)

LONG = " ".join(["und"] * 240)  # 241 tokens with eos: its output may pass the 256 positions
LINES = [LONG, "Guten Morgen.", " ".join(["1 2 3 4 5 6 7 8 9 10 11 12"] * 80)]  # the last: cut


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, shipped_copy):
    """A tiny translator (random weights of a fixed seed, max_len 64) with the shipped model's
    tokenizer."""
    from aiayn import ModelConfig

    directory = tmp_path_factory.mktemp("tiny") / "model"
    tokenizer = load_tokenizer(shipped_copy)
    config = ModelConfig.preset("tiny", vocab_size=tokenizer.vocab_size, max_len=64)
    with torch.random.fork_rng():  # the same weights whatever ran before (a word, not eos)
        torch.manual_seed(0)
        save_model_dir(directory, build_model(config).eval())
    tokenizer.save(directory)
    return directory


def translate_cli(argv, lines, monkeypatch, capsys) -> tuple[list[str], str]:
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out.splitlines(), err


def only_conversion(root):
    [entry] = [p for p in root.iterdir() if not p.name.startswith(".")]
    return entry


# --- long inputs ----------------------------------------------------------------------------


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_long_inputs_translate_through_the_cli_as_with_the_torch_engine(
    shipped_copy, quantize, monkeypatch, capsys
):
    q = ["--quantize", quantize] if quantize else []
    ct2, err = translate_cli(
        ["translate", str(shipped_copy), "--engine", "ctranslate2", *q], LINES, monkeypatch, capsys
    )
    assert "line 3: longer than the model's max_len (256 tokens)" in err  # the torch engine's
    assert len(ct2) == len(LINES) and all(ct2)
    if quantize is None:  # greedy: the torch engine's tokens, long inputs too
        ours, _ = translate_cli(["translate", str(shipped_copy)], LINES, monkeypatch, capsys)
        assert ct2 == ours


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_a_long_input_is_answered_by_the_server_with_the_ctranslate2_engine(shipped_copy, quantize):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx2")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec
    from tests.serve.conftest import wait_ready

    answers = {}
    for engine in ("torch", "ctranslate2"):
        spec = ModelSpec(shipped_copy, "ding", quantize=quantize, engine=engine)
        with TestClient(create_app([spec], ServeConfig())) as client:
            wait_ready(client)
            for beam in (1, 4):
                body = {"text": LINES[:2], "beam": beam}
                r = client.post("/v1/translate", json=body)
                assert r.status_code == 200, r.text
                answers[engine, beam] = [t["text"] for t in r.json()["translations"]]
                assert all(answers[engine, beam])
    if quantize is None:
        assert answers["ctranslate2", 1] == answers["torch", 1]


# --- a damaged cache ------------------------------------------------------------------------


def overwrite(path, offset=4096, size=64):
    with open(path, "r+b") as f:
        f.seek(offset)
        old = f.read(size)
        f.seek(offset)
        f.write(bytes(b ^ 0xFF for b in old))  # other bytes, the same size


DAMAGES = {
    "model.bin truncated": lambda d: os.truncate(d / "model.bin", 1000),
    "model.bin deleted": lambda d: (d / "model.bin").unlink(),
    "vocabulary not JSON": lambda d: (d / "shared_vocabulary.json").write_text("x{"),
    "model.bin overwritten": lambda d: overwrite(d / "model.bin"),
    "stamp deleted": lambda d: (d / STAMP).unlink(),
}


@pytest.mark.parametrize("quantize", [None, "int8"])
@pytest.mark.parametrize("kind", sorted(DAMAGES))
def test_a_damaged_cache_is_converted_again_with_one_warning(
    tiny, tmp_path, kind, quantize, monkeypatch, capsys
):
    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    argv = ["translate", str(model), "--engine", "ctranslate2", "--max-len-offset", "5"]
    argv += ["--quantize", quantize] if quantize else []
    lines = ["Guten Morgen.", "Wie geht es?"]
    first, err = translate_cli(argv, lines, monkeypatch, capsys)
    assert "is damaged" not in err and err.count("aiayn: converted") == 1
    cache = only_conversion(model / CACHE_DIR)
    DAMAGES[kind](cache)
    again, err = translate_cli(argv, lines, monkeypatch, capsys)
    assert again == first
    warning = [line for line in err.splitlines() if "is damaged" in line]
    assert len(warning) == 1 and str(cache) in warning[0] and "converting it again" in warning[0]
    assert only_conversion(model / CACHE_DIR) == cache
    assert damage(cache, conversion_inputs(model, quantize)) == ""  # whole again
    _, err = translate_cli(argv, lines, monkeypatch, capsys)
    assert "is damaged" not in err and "aiayn: converted" not in err  # and then reused


def test_the_server_starts_on_a_damaged_cache(tiny, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx2")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec
    from tests.serve.conftest import wait_ready

    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    cached_model(model)
    os.truncate(only_conversion(model / CACHE_DIR) / "model.bin", 1000)
    spec = ModelSpec(model, "tiny", engine="ctranslate2")
    with pytest.warns(UserWarning, match="damaged .model.bin has 1000 bytes"):
        with TestClient(create_app([spec], ServeConfig())) as client:
            wait_ready(client)
            r = client.post("/v1/translate", json={"text": ["Guten Morgen."]})
    assert r.status_code == 200 and r.json()["translations"][0]["text"]


def test_a_conversion_whose_files_check_but_do_not_load_is_converted_again(tiny, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    cache = cached_model(model)
    (cache / "model.bin").write_bytes(b"not a model")
    stamp = json.loads((cache / STAMP).read_text())
    stamp["files"] = file_digests(cache)  # a stamp that matches the bad file
    (cache / STAMP).write_text(json.dumps(stamp))
    with pytest.warns(UserWarning, match="cannot load the cached conversion"):
        engine = CTranslate2Engine(model, threads=1)
    assert damage(engine.path, conversion_inputs(model, None)) == ""
    assert (engine.path / "model.bin").stat().st_size > 1000


def test_an_error_names_the_model_when_converting_again_fails(tiny, tmp_path, monkeypatch):
    import ctranslate2

    def refuse(*args, **kwargs):
        raise RuntimeError("Unsupported model binary version")

    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    monkeypatch.setattr(ctranslate2, "Translator", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(UserError) as error:
            CTranslate2Engine(model, threads=1)
    assert str(model) in str(error.value) and "Unsupported model binary version" in str(error.value)
    assert len([w for w in caught if "converting it again" in str(w.message)]) == 1


# --- where the cache lives ------------------------------------------------------------------


def test_a_cache_directory_given_by_argument_flag_or_environment(
    tiny, tmp_path, monkeypatch, capsys
):
    import aiayn

    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    translator = aiayn.load(model, engine="ctranslate2", cache_dir=tmp_path / "arg")
    assert translator.decoder.path.parent == tmp_path / "arg"
    argv = ["translate", str(model), "--engine", "ctranslate2", "--cache-dir", str(tmp_path / "f")]
    _, err = translate_cli(argv, ["Ja."], monkeypatch, capsys)
    assert str(tmp_path / "f") in err  # the conversion's line says where it went
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env"))
    assert cached_model(model).parent == tmp_path / "env"
    assert not (model / CACHE_DIR).exists()  # the model directory was never written
    other = tmp_path / "other"  # another model in the same cache: both conversions stay
    shutil.copytree(tiny, other)
    (other / "config.json").write_text(
        (other / "config.json").read_text().replace('"dropout": 0.1', '"dropout": 0.2')
    )
    assert cached_model(other).parent == tmp_path / "env"
    assert len([p for p in (tmp_path / "env").iterdir() if not p.name.startswith(".")]) == 2


def test_a_cache_directory_that_cannot_be_written_is_named(tiny, tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(UserError, match=r"a-file/cache: cannot write .* \(--cache-dir"):
        cached_model(tiny, cache_dir=tmp_path / "a-file" / "cache")


def test_a_read_only_model_directory_caches_in_the_users_cache(tiny, tmp_path):
    """The model directory on a read-only mount (a user and mount namespace of its own)."""
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode
    ):
        pytest.skip("no user namespaces here (unshare -rm) to mount a directory read-only")
    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    script = textwrap.dedent(f"""\
        mount --bind {model} {model} && mount -o remount,bind,ro {model} || exit 99
        touch {model}/x 2>/dev/null && exit 98
        echo 'Guten Morgen.' | exec {sys.executable} -m aiayn.cli translate {model} \\
            --engine ctranslate2
    """)
    env = {k: v for k, v in os.environ.items() if k != CACHE_ENV}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    if done.returncode == 99:
        pytest.skip(f"cannot mount read-only here: {done.stderr}")
    assert done.returncode == 0, done.stderr
    root = tmp_path / "xdg" / "aiayn" / "ctranslate2"
    assert f"in {root}" in done.stderr or str(root) in done.stderr
    assert damage(only_conversion(root), conversion_inputs(model, None)) == ""
    assert not (model / CACHE_DIR).exists() and done.stdout.strip()


def test_processes_converting_at_once_leave_one_conversion(tiny, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    code = (
        "import sys; from aiayn.interop.ctranslate2 import cached_model as c; print(c(sys.argv[1]))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(model)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )  # fmt: skip
        for _ in range(4)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in results]
    assert len({out.strip() for out, _ in results}) == 1
    assert sum(err.count("aiayn: converted") for _, err in results) == 1  # one converted
    assert [p.name for p in (model / CACHE_DIR).iterdir() if not p.name.endswith(".lock")] == [
        only_conversion(model / CACHE_DIR).name
    ]


# --- quiet ----------------------------------------------------------------------------------


def test_a_conversion_prints_one_line_of_its_own(tiny, tmp_path, capfd):
    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no library warning reaches the user either
        CTranslate2Engine(model, threads=1)
    out, err = capfd.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"aiayn: converted {model} for CTranslate2 (float32) in ")
    assert str(model / CACHE_DIR) in lines[0]


def test_serve_caches_in_the_directory_its_flag_names(tiny, tmp_path):
    pytest.importorskip("fastapi")
    from aiayn.cli import build_parser
    from aiayn.serve.models import ServedModel
    from aiayn.serve.server import model_specs

    argv = ["serve", str(tiny), "--engine", "ctranslate2", "--cache-dir", str(tmp_path / "c")]
    args = build_parser().parse_args(argv)
    [spec] = model_specs(
        args.model_dir, args.name, args.languages, args.quantize, args.engine, args.cache_dir
    )
    served = ServedModel(spec)
    assert served.api.decoder.path.parent == tmp_path / "c"
