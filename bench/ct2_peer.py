"""CTranslate2 as a decoding peer: the same weights, converted from a Hugging Face
MarianMTModel directory by CTranslate2's own Transformers converter.

    python bench/ct2_peer.py [MODEL_DIR] --out DIR   # writes DIR/hf, DIR/ct2, DIR/ct2-int8

The Marian directory is written here from the aiayn model (``hf_marian_dir``): Marian's
sinusoidal table puts every sine before every cosine, so the model's d_model axis is
permuted throughout (an exact re-ordering of the same model), and a zero ``<pad>`` row is
appended to the vocabulary as Marian's decoder-start token. CTranslate2's Marian loader
always starts decoding from a zero embedding, which an aiayn model never saw (it starts
from the embedding of bos); the converter is the stock ``TransformersConverter`` with that
one switch turned off and bos as the start token (``BosStartConverter``), so that CTranslate2
decodes the model exactly (greedy output token-identical to aiayn's).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from aiayn.data.tokenizer import PAD, Tokenizer  # noqa: E402
from aiayn.modeldir import load_model_dir  # noqa: E402
from peers import marian_from  # noqa: E402


def _marian_layout(model):
    """A copy of ``model`` whose residual stream is permuted to Marian's [sin | cos] order."""
    import copy

    model = copy.deepcopy(model)
    d = model.config.d_model
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # sines, then cosines
    reads = ("in_proj.weight", "linear1.weight")  # (N, D): permute the input columns
    writes = ("out_proj.weight", "linear2.weight", "out_proj.bias", "linear2.bias")
    norms = (".weight", ".bias")
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith(reads):
                t.copy_(t[:, perm])
            elif name.endswith(writes) or (".norm" in name and name.endswith(norms)):
                t.copy_(t[perm])
        token = model.src_embed.token.weight  # tied to the target embedding and unembedding
        token.copy_(token[:, perm])
    return model


def hf_marian_dir(model, tokenizer: Tokenizer, out: Path) -> Path:
    """Write a MarianMTModel directory (weights, config, MarianTokenizer files) for ``model``."""
    out = Path(out)
    shutil.rmtree(out, ignore_errors=True)
    peer = marian_from(_marian_layout(model)).model
    v = tokenizer.vocab_size
    peer.resize_token_embeddings(v + 1, mean_resizing=False)
    with torch.no_grad():
        peer.model.shared.weight[v].zero_()  # Marian's decoder-start <pad>: a zero embedding
    peer.config.pad_token_id = peer.config.decoder_start_token_id = v
    peer.save_pretrained(out)
    vocab = {tokenizer.sp.id_to_piece(i): i for i in range(v)}
    vocab["<pad_aiayn>"] = vocab.pop(tokenizer.sp.id_to_piece(PAD))  # one name per id
    vocab["<pad>"] = v
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    for name in ("source.spm", "target.spm"):
        out.joinpath(name).write_bytes(tokenizer.proto)
    config = {"tokenizer_class": "MarianTokenizer", "source_lang": "de", "target_lang": "en"}
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


def convert(hf_dir: Path, out: Path, quantization: str | None = None) -> Path:
    """CTranslate2 model directory from a MarianMTModel directory (decoding from bos)."""
    from ctranslate2.converters import TransformersConverter

    class BosStartConverter(TransformersConverter):
        def _load(self):
            spec = super()._load()
            spec.decoder.start_from_zero_embedding = False
            spec.config.decoder_start_token = "<s>"
            return spec

    BosStartConverter(str(hf_dir)).convert(str(out), quantization=quantization, force=True)
    return Path(out)


def build(model_dir: Path, out: Path) -> dict[str, Path]:
    """{"float32": CT2 dir, "int8": CT2 dir} for the aiayn model in ``model_dir``."""
    import warnings

    out = Path(out)
    stamp = out / "source.json"
    weights = Path(model_dir) / "model.safetensors"
    key = {"model_dir": str(Path(model_dir).resolve()), "mtime": weights.stat().st_mtime}
    dirs = {"float32": out / "ct2", "int8": out / "ct2-int8"}
    if stamp.is_file() and json.loads(stamp.read_text()) == key:
        return dirs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, tokenizer = load_model_dir(model_dir), Tokenizer.load(Path(model_dir))
        hf = hf_marian_dir(model, tokenizer, out / "hf")
        convert(hf, dirs["float32"])
        convert(hf, dirs["int8"], "int8")
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
