"""CTranslate2 as a decoding peer: the same weights, exported by ``aiayn export --format hf``
(a MarianMTModel directory) and converted by CTranslate2's stock converter,
``ct2-transformers-converter --model HF_DIR --output_dir CT2_DIR [--quantization int8]``.

    python bench/ct2_peer.py [MODEL_DIR] [--out bench/.ct2]   # DIR/hf, DIR/ct2, DIR/ct2-int8

The converted models are kept and rebuilt only when the model's weights change.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from aiayn.interop.hf import export_hf  # noqa: E402


def converter() -> str:
    """The ct2-transformers-converter of this environment."""
    found = shutil.which("ct2-transformers-converter")
    here = Path(sys.executable).with_name("ct2-transformers-converter")
    if found is None and not here.is_file():
        raise SystemExit("ct2-transformers-converter not found: pip install 'aiayn[bench]'")
    return found or str(here)


def build(model_dir: Path, out: Path) -> dict[str, Path]:
    """{"float32": CT2 dir, "int8": CT2 dir} for the aiayn model in ``model_dir``."""
    out = Path(out)
    stamp = out / "source.json"
    weights = Path(model_dir) / "model.safetensors"
    key = {"model_dir": str(Path(model_dir).resolve()), "mtime": weights.stat().st_mtime}
    dirs = {"float32": out / "ct2", "int8": out / "ct2-int8"}
    if stamp.is_file() and json.loads(stamp.read_text()) == key:
        return dirs
    shutil.rmtree(out, ignore_errors=True)
    export_hf(Path(model_dir), out / "hf")
    for kind, path in dirs.items():
        command = [converter(), "--model", str(out / "hf"), "--output_dir", str(path)]
        if kind == "int8":
            command += ["--quantization", "int8"]
        subprocess.run(command, check=True, capture_output=True)
    stamp.write_text(json.dumps(key))
    return dirs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", nargs="?", default="models/ding-de-en")
    parser.add_argument("--out", default="bench/.ct2")
    args = parser.parse_args()
    for kind, path in build(Path(args.model_dir), Path(args.out)).items():
        print(f"{kind}: {path}")


if __name__ == "__main__":
    main()
