import os
import signal
import threading

import pytest
import torch

from aiayn import ModelConfig


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# Process state a test could leave behind for the tests after it, in whatever order they run.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD,
           signal.SIGALRM, signal.SIGXFSZ)  # fmt: skip
# set once by a library on first use, process-wide by design (torch's compile cache)
ENV_SET_BY_LIBRARIES = {
    "TORCHINDUCTOR_CACHE_DIR",
    "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR",  # inductor, on compiling a graph
    "TRITON_CACHE_DIR",  # inductor, on compiling for a GPU
    "TRITON_PTXAS_PATH",
    "PYTEST_CURRENT_TEST",
    "KMP_INIT_AT_FORK",  # joblib, on import (sacremoses's, when CTranslate2 converts a model)
}


def process_state() -> dict:
    """Signal handlers and mask, environment and working directory."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_SET_BY_LIBRARIES}
    return {
        **{signal.Signals(s).name: signal.getsignal(s) for s in SIGNALS},
        "blocked signals": signal.pthread_sigmask(signal.SIG_BLOCK, []),
        "environment": env,
        "working directory": os.getcwd(),
    }


def restore_process_state(state: dict) -> None:
    for s in SIGNALS:
        signal.signal(s, state[signal.Signals(s).name])
    signal.pthread_sigmask(signal.SIG_SETMASK, state["blocked signals"])
    for k in set(os.environ) - set(state["environment"]) - ENV_SET_BY_LIBRARIES:
        del os.environ[k]
    os.environ.update(state["environment"])
    os.chdir(state["working directory"])


@pytest.fixture(autouse=True)
def _leaves_no_process_state_behind():
    """Fail a test that changes signal handling, the environment or the working directory
    for the tests after it (and undo the change, so that only it fails)."""
    threads = torch.get_num_threads()
    before = process_state()
    yield
    torch.set_num_threads(threads)  # train.threads / --threads set it process-wide by design
    after = process_state()
    changed = [k for k in before if before[k] != after[k]]
    if changed:
        restore_process_state(before)
        names = [*changed]
        if "environment" in changed:  # which variables
            was, now = before["environment"], after["environment"]
            keys = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))
            names[names.index("environment")] = f"environment ({', '.join(keys)})"
        pytest.fail(f"the test left process state changed: {', '.join(names)}")


@pytest.fixture(autouse=True, scope="module")
def _leaves_no_thread_behind():
    """Fail a test module whose threads outlive it (daemon threads of libraries excepted)."""
    before = set(threading.enumerate())
    yield
    left = [t.name for t in set(threading.enumerate()) - before if not t.daemon]
    assert not left, f"threads still running after the module: {left}"


@pytest.fixture
def tiny() -> ModelConfig:
    """Tiny encoder-decoder config, dropout off so outputs are deterministic."""
    return ModelConfig.preset("tiny", dropout=0.0, embedding_dropout=0.0)


REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def write_sample_corpus(directory, n_train=400, n_valid=40, n_test=40):
    """A small slice of the bundled Ding corpus, in the same file layout."""
    import gzip

    src_dir = REPO_ROOT / "data" / "ding-de-en"
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        for lang in ("de", "en"):
            lines = gzip.decompress((src_dir / f"{split}.{lang}.gz").read_bytes()).splitlines()
            (directory / f"{split}.{lang}.gz").write_bytes(
                gzip.compress(b"\n".join(lines[:n]) + b"\n")
            )
    return directory


@pytest.fixture
def sample_corpus(tmp_path):
    return write_sample_corpus(tmp_path / "corpus")


def tiny_run_overrides(corpus, **train):
    """--set overrides for a seconds-long encoder-decoder run on ``corpus``."""
    settings = {
        "model.preset": '"tiny"',
        "model.max_len": "64",
        "data.corpus": f'"{corpus}"',
        "data.vocab_size": "400",
        "data.max_len": "48",
        "train.max_tokens": "400",
        "train.warmup": "20",
        "train.lr_scale": "2.0",
        "train.log_every": "5",
        "train.checkpoint_every": "5",
        "train.threads": "1",
        **{f"train.{k}": str(v) for k, v in train.items()},
    }
    return [f"{k}={v}" for k, v in settings.items()]


@pytest.fixture(scope="session")
def shipped_copy(tmp_path_factory):
    """A copy of models/ding-de-en (its CTranslate2 conversion, once made, shared by the tests
    that use it); skipped where the shipped model is not here."""
    import shutil

    source = REPO_ROOT / "models" / "ding-de-en"
    if not (source / "model.safetensors").is_file():
        pytest.skip("models/ding-de-en is not here")
    directory = tmp_path_factory.mktemp("ding") / "model"
    shutil.copytree(source, directory, ignore=shutil.ignore_patterns(".ctranslate2", "*.png"))
    return directory
