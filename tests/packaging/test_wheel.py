"""What a user who installs aiayn gets: the sdist and the wheel built with every warning an
error, checked by twine, and the wheel (not an editable install) used from an empty directory
far from the repository: prepare, train, translate, serve, ``aiayn.load`` and a strict type
check of a user's script. Slow (a new virtual environment, about two minutes): CI runs it."""

from __future__ import annotations

import http.client
import importlib.metadata
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

# what an sdist must never carry: runs, environments, caches, model weights
NOT_IN_SDIST = ("/.venv/", "/runs/", "/models/", "/.ctranslate2/", "/dist/", "/build/", "/.git/")
WEIGHTS = (".safetensors", ".pt", ".bin", ".model", ".argosmodel")

TINY_CONFIG = """\
[model]
preset = "tiny"
max_len = 64

[data]
corpus = "data/ding-de-en"
vocab_size = 400
max_len = 48

[train]
max_tokens = 400
warmup = 20
max_steps = 6
log_every = 3
checkpoint_every = 3
threads = 1
"""

USER_SCRIPT = '''\
"""A user's script: load a translator and read its typed results."""

import sys

import aiayn


def translate(model: str, texts: list[str]) -> list[str]:
    translator = aiayn.load(model)
    if not isinstance(translator, aiayn.Translator):
        raise SystemExit(f"{model} is not a translator")
    results: list[aiayn.Translation] = translator.translate(texts, beam=2)
    best: aiayn.Hypothesis = results[0].best
    return [f"{r.text}\\t{best.score:.3f}\\t{r.truncated}" for r in results]


if __name__ == "__main__":
    print("\\n".join(translate(sys.argv[1], ["Das ist gut.", "Guten Morgen."])))
'''


def run(argv, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done


def build(source: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m build`` on ``source``, every Python warning of the build backend an error
    (so the next setuptools deprecation fails here, not on a user's machine)."""
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    return run([sys.executable, "-W", "error", "-m", "build", *args, "--outdir", out, source],
               cwd=source, env=env)  # fmt: skip


def checkout(to: Path) -> Path:
    """The repository's files as a clean checkout has them (tracked, and new files not ignored),
    copied to ``to``: a wheel built there leaves no build/ directory in the repository."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                 cwd=REPO_ROOT).stdout  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file() and not name.startswith(("models/", "data/", "bench/")):
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)
    return to


def wheel_record(wheel: Path) -> set[str]:
    """The wheel's files with their hashes, from its RECORD (RECORD's own line left out)."""
    with zipfile.ZipFile(wheel) as z:
        record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        lines = z.read(record).decode().splitlines()
    return {line for line in lines if line and not line.startswith(record)}


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    # the sdist, then the wheel built from the unpacked sdist: from the repository itself, where
    # whatever lies around (runs, environments, weights) could leak into the sdist
    done = build(REPO_ROOT, out / "both")
    assert "deprecat" not in (done.stdout + done.stderr).lower(), done.stderr
    # the wheel straight from the source tree (a copy: a wheel build leaves build/ behind)
    build(checkout(out / "tree-source"), out / "tree", "--wheel")
    return {
        "sdist": next((out / "both").glob("aiayn-*.tar.gz")),
        "wheel": next((out / "both").glob("aiayn-*.whl")),
        "tree_wheel": next((out / "tree").glob("aiayn-*.whl")),
    }


@pytest.fixture(scope="module")
def venv(dists, tmp_path_factory) -> Path:
    """A new virtual environment with the wheel and its serve extra (CPU torch, as set-up)."""
    root = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", root / "venv"], cwd=root)
    python = root / "venv" / "bin" / "python"
    wheel = f"{dists['wheel']}[serve]"
    constraints = REPO_ROOT / "constraints-cpu.txt"
    run([python, "-m", "pip", "install", "--quiet", "-c", constraints, wheel], cwd=root)
    return root / "venv" / "bin"


@pytest.fixture(scope="module")
def user_env(venv) -> dict[str, str]:
    """The environment of a user who activated the new venv: nothing points at the repository."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv.parent)
    return env


def test_twine_accepts_both_distributions(dists):
    pytest.importorskip("twine")
    run([sys.executable, "-m", "twine", "check", "--strict", dists["sdist"], dists["wheel"]],
        cwd=REPO_ROOT)  # fmt: skip


def test_the_sdist_builds_the_wheel_of_the_tree(dists):
    assert wheel_record(dists["wheel"]) == wheel_record(dists["tree_wheel"])


def test_the_sdist_holds_the_sources_and_licence_only(dists):
    with tarfile.open(dists["sdist"]) as t:
        names = [n.split("/", 1)[1] for n in t.getnames() if "/" in n]
    assert "LICENSE" in names and "pyproject.toml" in names and "README.md" in names
    assert "src/aiayn/serve/static/index.html" in names and "src/aiayn/py.typed" in names
    for name in names:
        assert not any(part in f"/{name}/" for part in NOT_IN_SDIST), name
        assert not name.endswith(WEIGHTS), name


def test_the_wheel_carries_its_resources_and_metadata(dists):
    with zipfile.ZipFile(dists["wheel"]) as z:
        names = set(z.namelist())
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {"aiayn/py.typed", "aiayn/serve/static/index.html"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any(n.endswith(WEIGHTS) or n.startswith(("tests/", "bench/")) for n in names)
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Programming Language :: Python :: 3.11" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    source = (REPO_ROOT / "src" / "aiayn" / "__init__.py").read_text()
    version = metadata.split("\nVersion: ")[1].split()[0]
    assert f'__version__ = "{version}"' in source


def test_the_installed_wheel_works_from_an_empty_directory(venv, user_env, tmp_path):
    home = tmp_path / "user"  # an empty directory far from the repository
    home.mkdir()
    py = venv / "python"
    where = run([py, "-c", "import aiayn; print(aiayn.__file__)"], home, user_env).stdout
    assert str(venv.parent) in where and str(REPO_ROOT) not in where, where

    version = run([venv / "aiayn", "--version"], home, user_env).stdout.split()
    metadata = "import importlib.metadata as m; print(m.version('aiayn'))"
    assert version == ["aiayn", run([py, "-c", metadata], home, user_env).stdout.strip()]
    assert version[1] == importlib.metadata.version("aiayn")

    run([venv / "aiayn", "prepare", "ding-de-en"], home, user_env)
    assert (home / "data" / "ding-de-en").is_dir()
    (home / "tiny.toml").write_text(TINY_CONFIG)
    run([venv / "aiayn", "train", "tiny.toml", "--out", "run", "--quiet"], home, user_env)
    assert (home / "run" / "model" / "model.safetensors").is_file()

    done = subprocess.run(
        [venv / "aiayn", "translate", "run/model"], cwd=home, env=user_env, capture_output=True,
        text=True, input="Das ist gut.\nGuten Morgen.\n", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 2, done.stderr

    (home / "use_aiayn.py").write_text(USER_SCRIPT)
    lines = run([py, "use_aiayn.py", "run/model"], home, user_env).stdout.splitlines()
    assert len(lines) == 2 and lines[0].endswith("\tFalse"), lines

    served = serve(venv, home, user_env)
    assert served["/health"][0] == 200
    assert served["/"][0] == 200 and "<html" in served["/"][1].lower()


def test_a_strict_type_check_of_a_user_script_passes(venv, user_env, tmp_path):
    """mypy --strict against the installed wheel: py.typed makes its annotations count."""
    pytest.importorskip("mypy")
    (tmp_path / "use_aiayn.py").write_text(USER_SCRIPT)
    argv = [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
            "--python-executable", venv / "python", "use_aiayn.py"]  # fmt: skip
    done = subprocess.run([str(a) for a in argv], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={**user_env, "PATH": os.environ["PATH"]})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # the script was checked against the wheel: a wrong type in it is caught
    (tmp_path / "wrong.py").write_text(USER_SCRIPT.replace("list[aiayn.Translation]", "list[int]"))
    argv[-1] = "wrong.py"
    done = subprocess.run([str(a) for a in argv], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={**user_env, "PATH": os.environ["PATH"]})  # fmt: skip
    assert done.returncode == 1 and "Translation" in done.stdout, done.stdout


def serve(venv: Path, home: Path, env: dict[str, str]) -> dict[str, tuple[int, str]]:
    """``aiayn serve run/model`` on a free loopback port: the answers to GET /health and /."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [str(venv / "aiayn"), "serve", "run/model", "--port", str(port)]
    proc = subprocess.Popen(argv, cwd=home, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    answers: dict[str, tuple[int, str]] = {}
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, f"the server did not get ready: {answers}"
            try:
                answers["/health"] = get(port, "/health")
            except OSError:  # not listening yet
                pass
            if answers.get("/health", (503,))[0] != 503:  # 503: the model is still loading
                break
            time.sleep(0.2)
        answers["/"] = get(port, "/")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return answers


def get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()
