"""Write the CTranslate2 models of older binary versions that tests/interop/test_ct2_import.py
reads: tiny random Transformers serialised by the spec API of CTranslate2 2.24.0 (binary
version 5: the special tokens and source framing as variables, ``.txt`` vocabularies) and of
1.20.1 (binary version 4, TransformerSpec revision 3: one ``num_heads`` for both stacks,
``encoder/embeddings`` without an index, ``multiply_by_sqrt_depth``), int8 as the Argos
Translate packages of that time were. CTranslate2 4.x still reads both.

    python scripts/old_ctranslate2_models.py    # needs PyPI: pip downloads the two wheels

Only the wheels' pure-Python spec modules run (in a child process, under a stub
``ctranslate2`` package; their compiled part is for older Pythons). The vocabulary is that of
the test's sentencepiece model (tests/interop/ct2_fixtures.py), so the files written here stay
small: model.bin and the vocabulary, in tests/interop/data/ctranslate2-VERSION/.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "interop" / "data"
VERSIONS = {"2.24.0": "3.10", "1.20.1": "3.8"}  # a Python its wheel was built for

CHILD = r"""
import json, os, sys
import numpy as np
from ctranslate2.specs import transformer_spec

args = json.loads(sys.argv[1])
vocab, out, version = args["vocab"], args["out"], args["version"]
D, H, F, L = 16, 2, 32, 2
rng = np.random.default_rng(3)

def rand(*shape, scale):
    return (scale * rng.standard_normal(shape)).astype(np.float32)

if version.startswith("1."):
    spec = transformer_spec.TransformerSpec(L, H)
else:
    spec = transformer_spec.TransformerSpec(L, H, pre_norm=True)
    spec.with_source_eos = True  # what the framing of sources is, in binary version 5
enc, dec = spec.encoder, spec.decoder
shared = rand(len(vocab), D, scale=0.3)
for stack in (enc, dec):
    embeddings = stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings
    embeddings.weight = shared
    if hasattr(embeddings, "multiply_by_sqrt_depth"):
        embeddings.multiply_by_sqrt_depth = True  # as the OpenNMT-py converter of 1.x sets it
    position = np.arange(256, dtype=np.float32)[:, None]  # the sinusoid, as converters store it
    rate = np.exp(np.arange(0, D, 2, dtype=np.float32) * -(np.log(10000.0) / D))
    table = np.zeros((256, D), dtype=np.float32)
    table[:, 0::2], table[:, 1::2] = np.sin(position * rate), np.cos(position * rate)
    stack.position_encodings.encodings = table
dec.projection.weight = shared
bias = rand(len(vocab), scale=0.1)
bias[vocab.index("</s>")] += 1.0
bias[vocab.index("<blank>")] = -10.0
dec.projection.bias = bias

def shape(name):
    if name.endswith(("gamma", "beta")):
        return (D,)
    layer, leaf = name.split("/")[-3:-1], name.split("/")[-1]
    key = "/".join(layer)
    out_in = {"ffn/linear_0": (F, D), "ffn/linear_1": (D, F),
              "self_attention/linear_0": (3 * D, D), "self_attention/linear_1": (D, D),
              "attention/linear_0": (D, D), "attention/linear_1": (2 * D, D),
              "attention/linear_2": (D, D)}[key]
    return out_in if leaf == "weight" else out_in[:1]

def fill(layer, scope):
    for name, value in list(vars(layer).items()):
        if name.startswith("_"):
            continue
        path = scope + "/" + name
        if isinstance(value, list):
            for i, item in enumerate(value):
                fill(item, f"{path}_{i}")
        elif hasattr(value, "__dict__") and not isinstance(value, (np.ndarray, np.generic)):
            fill(value, path)
        elif value is None or (name == "bias" and isinstance(value, str)):
            if name in ("gamma",):
                setattr(layer, name, 1 + rand(*shape(path), scale=0.1))
            elif name == "weight":  # as tests/interop/ct2_fixtures.py's GAIN and QK
                value = rand(*shape(path), scale=4 * shape(path)[1] ** -0.5)
                if path.endswith("attention/linear_0/weight"):
                    value[: 2 * D if "self_attention" in path else D] *= 0.5
                setattr(layer, name, value)
            else:
                setattr(layer, name, rand(*shape(path), scale=0.1))

for stack, scope in ((enc, "encoder"), (dec, "decoder")):
    for i, layer in enumerate(stack.layer):
        fill(layer, f"{scope}/layer_{i}")
    fill(stack.layer_norm, f"{scope}/layer_norm")
if hasattr(spec, "register_source_vocabulary"):
    spec.register_source_vocabulary(vocab)
    spec.register_target_vocabulary(vocab)
else:
    spec.register_vocabulary("source", vocab)
    spec.register_vocabulary("target", vocab)
spec.validate()
spec.optimize(quantization="int8")
os.makedirs(out)
spec.save(out)
"""


def stub(wheel: Path, into: Path) -> Path:
    """The wheel's ``ctranslate2/specs`` under an empty ``ctranslate2`` package."""
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith("ctranslate2/specs/") and name.endswith(".py"):
                z.extract(name, into)
    (into / "ctranslate2" / "__init__.py").write_text("")
    return into


def main() -> None:
    sys.path.insert(0, str(REPO / "src"))
    sys.path.insert(0, str(REPO))
    from tests.interop import ct2_fixtures as fx

    vocab = fx.vocabulary(fx.shared_spm(), seed=6)
    with tempfile.TemporaryDirectory() as tmp:
        for version, python in VERSIONS.items():
            wheels = Path(tmp) / version
            subprocess.run(
                [sys.executable, "-m", "pip", "download", f"ctranslate2=={version}", "--no-deps",
                 "--only-binary", ":all:", "--python-version", python,
                 "--platform", "manylinux2014_x86_64", "-d", str(wheels), "-q"],
                check=True,
            )  # fmt: skip
            wheel = next(wheels.glob("*.whl"))
            path = stub(wheel, Path(tmp) / f"stub-{version}")
            out = OUT / f"ctranslate2-{version}"
            if out.exists():
                for f in out.iterdir():
                    f.unlink()
                out.rmdir()
            args = json.dumps({"vocab": vocab, "out": str(out), "version": version})
            subprocess.run(
                [sys.executable, "-c", CHILD, args], check=True, env={"PYTHONPATH": str(path)}
            )
            print(f"{out}: {sorted(p.name for p in out.iterdir())}")


if __name__ == "__main__":
    main()
