"""``--device`` and ``--dtype`` on every inference command and the server: auto and cpu run
on the CPU where there is no GPU, as before; a device or dtype this machine cannot run is one
line naming the flag, before any model loads or input is read."""

import io
import json
from pathlib import Path

import pytest
import torch

import aiayn.api
from aiayn.cli import main
from aiayn.modeldir import ModelDir
from tests.conftest import write_sample_corpus
from tests.serve.conftest import model_dirs  # noqa: F401 - a fixture

try:
    from aiayn.serve import server
except ImportError:  # no serve extra
    server = None
SERVE = pytest.param("serve", marks=pytest.mark.skipif(server is None, reason="needs aiayn[serve]"))
COMMANDS = ["translate", "evaluate", "generate", "classify", "embed", "attention", SERVE]
LINES = "Guten Morgen.\nDas Haus ist groß.\n"
LOAD = ModelDir.load


@pytest.fixture(scope="module")
def dirs(model_dirs):  # noqa: F811 - tests/serve's tiny models, one of each family
    return model_dirs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_sample_corpus(tmp_path_factory.mktemp("device") / "corpus", 0, 8, 4)


def argv(command: str, dirs: dict, corpus, out) -> list[str]:
    """``command`` on the tiny model of its family; its output file (if any) is ``out``."""
    return {
        "translate": ["translate", str(dirs["translator"]), "--max-len-offset", "4"],
        "evaluate": ["evaluate", str(dirs["translator"]), "--corpus", str(corpus),
                     "--limit", "3", "--samples", "0", "--max-len-offset", "4",
                     "--output", str(out)],
        "generate": ["generate", str(dirs["lm"]), "--prompt", "the", "--max-new-tokens", "5",
                     "--seed", "1"],
        "classify": ["classify", str(dirs["classifier"])],
        "embed": ["embed", str(dirs["classifier"])],
        "attention": ["attention", str(dirs["translator"]), "Guten Morgen.", "--out", str(out)],
        "serve": ["serve", str(dirs["translator"]), "--port", "0"],
    }[command]  # fmt: skip


@pytest.fixture
def no_cuda(monkeypatch):
    """A machine without a CUDA GPU, whatever this one has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


class Untouchable(io.TextIOBase):
    """A stdin that fails the test when anything reads it."""

    @property
    def buffer(self):
        raise AssertionError("stdin was read")

    def read(self, *args):
        raise AssertionError("stdin was read")

    def __iter__(self):
        raise AssertionError("stdin was read")


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a model loads, stdin is read or the server starts."""

    def fail(*args, **kwargs):
        raise AssertionError("work began")

    for target, name in [
        (aiayn.api, "load"),
        (aiayn.api, "load_for"),
        (ModelDir, "load"),
        (server, "run_server"),
    ]:
        if target is not None:
            monkeypatch.setattr(target, name, fail)
    monkeypatch.setattr("sys.stdin", Untouchable())


def run_cli(capsys, args):
    code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize("command", COMMANDS)
def test_cuda_without_cuda_is_refused_before_any_work(
    command, dirs, corpus, tmp_path, capsys, no_cuda, no_work
):
    out = tmp_path / "out.txt"
    for device in ("cuda", "cuda:1"):
        code, stdout, err = run_cli(capsys, [*argv(command, dirs, corpus, out), "--device", device])
        assert code == 2, err
        assert f"aiayn {command}: error: --device {device}: CUDA is not available" in err
        assert "use --device cpu or auto" in err
        assert not stdout and not out.exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_gpu_past_the_count_and_bad_values_are_named(
    command, dirs, corpus, tmp_path, capsys, monkeypatch, no_work
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    out = tmp_path / "out.txt"
    base_argv = argv(command, dirs, corpus, out)
    code, _, err = run_cli(capsys, [*base_argv, "--device", "cuda:3"])
    assert code == 2 and "--device cuda:3: this machine has 1 CUDA GPU (cuda:0)" in err
    for bad in ("gpu", "cuda:x"):
        code, _, err = run_cli(capsys, [*base_argv, "--device", bad])
        assert code == 2
        assert f"--device {bad!r}: choose auto, cpu, cuda or cuda:N" in err
    assert not out.exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_float16_on_the_cpu_is_refused(command, dirs, corpus, tmp_path, capsys, no_cuda, no_work):
    out = tmp_path / "out.txt"
    for device in ("cpu", "auto"):
        args = [*argv(command, dirs, corpus, out), "--device", device, "--dtype", "float16"]
        code, _, err = run_cli(capsys, args)
        assert code == 2
        assert "--dtype float16 runs on CUDA only" in err
        assert "use --dtype bfloat16 or float32" in err
    assert not out.exists()


@pytest.mark.parametrize("command", ["translate", "evaluate", "generate", "classify", SERVE])
def test_int8_refuses_cuda_and_other_dtypes(
    command, dirs, corpus, tmp_path, capsys, monkeypatch, no_work
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    base_argv = [*argv(command, dirs, corpus, tmp_path / "out"), "--quantize", "int8"]
    code, _, err = run_cli(capsys, [*base_argv, "--device", "cuda"])
    assert code == 2 and "int8 layers (--quantize int8," in err
    assert "run on the CPU only, not on --device cuda" in err
    code, _, err = run_cli(capsys, [*base_argv, "--device", "cpu", "--dtype", "bfloat16"])
    assert code == 2 and "compute in float32, not in --dtype bfloat16" in err


def test_ctranslate2_refuses_a_dtype_before_converting(dirs, capsys, no_cuda, no_work):
    cache = dirs["translator"] / ".ctranslate2"  # another test may have converted it already
    before = sorted(cache.rglob("*")) if cache.exists() else None
    args = ["translate", str(dirs["translator"]), "--engine", "ctranslate2"]
    code, _, err = run_cli(capsys, [*args, "--dtype", "bfloat16"])
    assert code == 2 and "--dtype bfloat16 needs --engine torch" in err
    assert (sorted(cache.rglob("*")) if cache.exists() else None) == before  # nothing converted


def _output(command, dirs, corpus, tmp_path, capsys, monkeypatch, flags, name):
    """What ``command`` prints (or writes) with ``flags``, and the (device, dtype) its
    models loaded with."""
    loads = []

    def recorded(directory, device, quantize=None, dtype=torch.float32):
        loads.append((device, dtype))
        return LOAD(directory, device, quantize=quantize, dtype=dtype)

    monkeypatch.setattr(ModelDir, "load", recorded)
    monkeypatch.setattr("sys.stdin", io.StringIO(LINES))
    out = tmp_path / name
    served, plotted = [], []
    if command == "attention":  # the weights plotted, not matplotlib's seconds of drawing

        def heatmaps(maps, rows, columns, title, path):
            plotted.extend(maps)
            Path(path).write_bytes(b"png")

        monkeypatch.setattr("aiayn.viz._heatmap_grid", heatmaps)
    if command == "serve":
        from aiayn.serve.models import ServedModel

        def run_server(specs, config, host, port, **settings):
            served.extend(ServedModel(spec).describe() for spec in specs)
            return 0

        monkeypatch.setattr(server, "run_server", run_server)
    code, stdout, err = run_cli(capsys, [*argv(command, dirs, corpus, out), *flags])
    assert code == 0, err
    if command == "evaluate":
        stdout = out.read_text()  # the hypotheses (the printed scores hold a speed)
    elif command == "attention":
        assert out.read_bytes() == b"png"
        assert plotted and all(m.dtype == "float32" for m in plotted)  # numpy has no bfloat16
        stdout = json.dumps([m.round(3).tolist() for m in plotted])
    elif command == "serve":
        stdout = json.dumps([{k: m[k] for k in ("device", "dtype", "id")} for m in served])
    return stdout, loads


@pytest.mark.parametrize("command", COMMANDS)
def test_cpu_and_auto_run_on_the_cpu_as_before(
    command, dirs, corpus, tmp_path, capsys, monkeypatch, no_cuda
):
    before, loads = _output(command, dirs, corpus, tmp_path, capsys, monkeypatch, [], "a")
    assert loads == [(torch.device("cpu"), torch.float32)]
    for i, device in enumerate(["cpu", "auto"]):
        flags = ["--device", device]
        got, loads = _output(command, dirs, corpus, tmp_path, capsys, monkeypatch, flags, f"{i}")
        assert got == before
        assert loads == [(torch.device("cpu"), torch.float32)]
    if command == "serve":
        assert json.loads(before)[0]["device"] == "cpu"
    assert before.strip()


@pytest.mark.parametrize("command", COMMANDS)
def test_bfloat16_on_the_cpu_runs_every_command(
    command, dirs, corpus, tmp_path, capsys, monkeypatch, no_cuda
):
    flags = ["--dtype", "bfloat16"]
    got, loads = _output(command, dirs, corpus, tmp_path, capsys, monkeypatch, flags, "b")
    assert loads == [(torch.device("cpu"), torch.bfloat16)]
    if command == "classify":
        assert [line.split("\t")[0] in ("neg", "neutral", "pos") for line in got.splitlines()] == [
            True,
            True,
        ]
    elif command == "embed":
        assert [len(json.loads(line)) for line in got.splitlines()] == [32, 32]
    elif command == "serve":
        assert json.loads(got)[0]["dtype"] == "bfloat16"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_translate_on_cuda_agrees_with_the_cpu(shipped_copy, capsys, monkeypatch):
    import gzip

    from tests.conftest import REPO_ROOT

    lines = gzip.decompress((REPO_ROOT / "data/ding-de-en/test.de.gz").read_bytes())
    text = "\n".join(lines.decode().splitlines()[:100]) + "\n"
    outputs = {}
    for device in ("cpu", "cuda", "auto"):
        monkeypatch.setattr("sys.stdin", io.StringIO(text))
        code, out, err = run_cli(capsys, ["translate", str(shipped_copy), "--device", device])
        assert code == 0, err
        outputs[device] = out.splitlines()
    assert len(outputs["cuda"]) == 100
    # different kernels round differently: greedy search may flip a near-tie, rarely
    differ = sum(a != b for a, b in zip(outputs["cpu"], outputs["cuda"], strict=True))
    assert differ <= 5, f"{differ} of 100 translations differ between cpu and cuda"
    assert outputs["auto"] == outputs["cuda"]  # auto is cuda here
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, err = run_cli(capsys, ["translate", str(shipped_copy), "--dtype", "bfloat16"])
    assert code == 0, err
    differ = sum(a != b for a, b in zip(outputs["cpu"], out.splitlines(), strict=True))
    assert differ <= 35, f"{differ} of 100 bfloat16 translations differ from float32's"
