"""Tiny random models of the three families saved as model directories, and a test client."""

import gzip
import http.client
import threading
import time
from contextlib import contextmanager

import pytest
import torch

from aiayn import ModelConfig, build_model
from aiayn.data.tokenizer import CharTokenizer, Tokenizer
from aiayn.fileio import write_json
from aiayn.modeldir import save_model_dir
from tests.conftest import REPO_ROOT
from tests.interop.argos_fixtures import (  # noqa: F401 (the Argos Translate packages, built once)
    argos_packages,
    bpe_package,
    marian_package,
    prenorm_package,
)


def _ding_lines(n: int) -> list[str]:
    lines = []
    for lang in ("de", "en"):
        raw = gzip.decompress((REPO_ROOT / "data/ding-de-en" / f"train.{lang}.gz").read_bytes())
        lines += raw.decode().splitlines()[:n]
    return lines


def _save(directory, config, tokenizer, run: dict):
    torch.manual_seed(0)
    model = build_model(config).eval()
    save_model_dir(directory, model)
    tokenizer.save(directory)
    write_json(directory / "run.json", run)
    return directory


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory):
    """{"translator", "classifier", "lm"}: model directories of tiny random models."""
    root = tmp_path_factory.mktemp("served")
    bpe = Tokenizer.train(_ding_lines(300), vocab_size=400)
    tiny = ModelConfig.preset("tiny", dropout=0.0, embedding_dropout=0.0, attention_dropout=0.0)
    translator = _save(
        root / "de-en",
        tiny.replace(vocab_size=bpe.vocab_size, max_len=64),
        bpe,
        {"data": {"task": "translation", "src_lang": "de", "tgt_lang": "en"}},
    )
    classifier = _save(
        root / "sentiment",
        tiny.replace(family="encoder-only", vocab_size=bpe.vocab_size, n_classes=3, pooling="mean"),
        bpe,
        {"data": {"task": "classification"}, "labels": ["neg", "neutral", "pos"]},
    )
    chars = CharTokenizer.train(["the quick brown fox jumps over the lazy dog. äöü ß €"])
    lm = _save(
        root / "lm",
        tiny.replace(family="decoder-only", vocab_size=chars.vocab_size, max_len=64),
        chars,
        {"data": {"task": "lm", "block_size": 32}},
    )
    return {"translator": translator, "classifier": classifier, "lm": lm}


PAIRS = (("de", "en"), ("en", "fr"), ("en", "es"))  # pair_dirs': three pairs sharing English


@pytest.fixture(scope="session")
def pair_dirs(tmp_path_factory):
    """{"de-en", "en-fr", "en-es"} (``PAIRS``): tiny random translators, each its own
    weights (a seed each), one tokenizer; max_len 256, so that a translation (up to 50
    tokens longer than its source) can be read again through a pivot."""
    root = tmp_path_factory.mktemp("pairs")
    bpe = Tokenizer.train(_ding_lines(300), vocab_size=400)
    config = ModelConfig.preset(
        "tiny", dropout=0.0, embedding_dropout=0.0, attention_dropout=0.0
    ).replace(vocab_size=bpe.vocab_size, max_len=256)
    dirs = {}
    for seed, (source, target) in enumerate(PAIRS, 1):
        directory = root / f"{source}-{target}"
        torch.manual_seed(seed)
        save_model_dir(directory, build_model(config).eval())
        bpe.save(directory)
        data = {"task": "translation", "src_lang": source, "tgt_lang": target}
        write_json(directory / "run.json", {"data": data})
        dirs[directory.name] = directory
    return dirs


def wait_ready(client, seconds: float = 600.0):
    """Wait until the models of ``client``'s app are loaded (its registry's ``ready``; a
    load that failed fails here at once, with its error), then /health answers 200. The
    deadline is generous: on a 2-core host under a load of 13, three tiny models took more
    than 30 s to load, and the first load of a model converts it for CTranslate2."""
    registry = client.app.state.registry
    deadline = time.monotonic() + seconds
    while not registry.ready.wait(0.05):
        assert registry.error is None, f"the models failed to load: {registry.error}"
        assert time.monotonic() < deadline, f"the models did not load in {seconds:g} s"
    r = client.get("/health")
    assert r.status_code == 200, f"server not ready: {r.status_code} {r.text}"
    return r


def wait_process_ready(port: int, proc, seconds: float = 600.0) -> None:
    """Wait until the ``aiayn serve`` process ``proc`` answers /health with 200 on ``port``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("the server did not become ready")


def make_client(model_dirs, access=None, frontend=None, **limits):
    """A test client of the app serving ``model_dirs``; ``access``, ``frontend``: the
    ``AccessConfig`` and ``FrontendConfig`` (default: the server's defaults)."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    specs = [ModelSpec(path, path.name) for path in model_dirs.values()]
    return TestClient(create_app(specs, ServeConfig(**limits), access=access, frontend=frontend))


@pytest.fixture(scope="module")
def client(model_dirs):
    """The three models with the server's default settings, and /metrics on."""
    from aiayn.serve.access import AccessConfig

    with make_client(model_dirs, access=AccessConfig(metrics=True, metrics_open=True)) as c:
        wait_ready(c)
        yield c


@contextmanager
def live_server(app, config=None):
    """uvicorn serving ``app`` on 127.0.0.1 (a free port) in a thread, with uvicorn's
    ``config`` if given (its app, host and port then); yields the port and stops the server,
    its thread and the app's queues on exit."""
    import uvicorn

    if config is None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="test-uvicorn")
    thread.start()
    try:
        deadline = time.monotonic() + 600  # the app's start-up may load models (a loaded host)
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(600)
        assert not thread.is_alive()
