import pytest
import torch

from aiayn import ModelConfig


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


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
