"""Exactness (and speed) of the Hugging Face export on real weights: the shipped model against
transformers' MarianMTModel and CTranslate2, and optionally all-MiniLM-L6-v2 imported.

    python bench/interop.py [MODEL_DIR] [--sentences 200] [--threads 1] [--minilm HF_DIR]

MODEL_DIR (default models/ding-de-en) is exported with ``aiayn export``; on the first
``--sentences`` of its corpus's test split it measures the largest difference of
teacher-forced log-probabilities (aiayn vs transformers, fp32), how many greedy and beam-4
translations (length penalty 0) transformers and CTranslate2 (if installed) give exactly as
aiayn does, and the decoding speed of aiayn and CTranslate2 (one sentence at a time would be
slower for both; batches as ``aiayn translate`` forms them). ``--minilm`` (a directory from
scripts/minilm.py) adds the mean-pooled embedding difference against transformers' BertModel
on the Rotten Tomatoes test texts. Appends a record to bench/results/interop.jsonl.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from aiayn.data.batching import pad  # noqa: E402
from aiayn.data.tokenizer import BOS, EOS  # noqa: E402
from aiayn.infer.translate import translate  # noqa: E402
from aiayn.interop.hf import export_hf, import_hf  # noqa: E402
from aiayn.modeldir import load_model_dir  # noqa: E402
from aiayn.modeldir.tokenizer_files import load_tokenizer
from common import write_result  # noqa: E402

ROOT = Path(__file__).parents[1]


def test_sentences(model_dir: Path, n: int) -> list[str]:
    run = json.loads((model_dir / "run.json").read_text())["data"]
    corpus = ROOT / run["corpus"]
    lines = gzip.decompress((corpus / f"test.{run['src_lang']}.gz").read_bytes()).decode()
    return [line for line in lines.split("\n") if line.strip()][:n]


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


@torch.no_grad()
def marian_record(model_dir: Path, n: int, work: Path) -> dict:
    import transformers

    transformers.logging.set_verbosity_error()
    sources = test_sentences(model_dir, n)
    model, tok = load_model_dir(model_dir), load_tokenizer(model_dir)
    export_hf(model_dir, work / "hf")
    peer = transformers.MarianMTModel.from_pretrained(work / "hf").eval()
    peer_tok = transformers.AutoTokenizer.from_pretrained(work / "hf")
    record: dict = {"model": str(model_dir), "sentences": len(sources)}
    ours, seconds = {}, {}
    for beam in (1, 4):
        out, seconds[f"aiayn_beam{beam}"] = timed(
            lambda beam=beam: translate(model, tok, sources, beam=beam, lenpen=0.0)
        )
        ours[beam] = [x[0][0] for x in out]
    # teacher-forced log-probabilities of our greedy translations
    worst, scale = 0.0, 0.0
    for i in range(0, len(sources), 32):
        src = [x + [EOS] for x in tok.encode(sources[i : i + 32])]
        tgt = [[BOS] + x for x in tok.encode(ours[1][i : i + 32])]
        s, t = pad(src), pad(tgt)
        mine = model(s, t).log_softmax(-1)
        hf_s = peer_tok(sources[i : i + 32], return_tensors="pt", padding=True)
        theirs = peer(**hf_s, decoder_input_ids=to_theirs(tok, peer, t)).logits.log_softmax(-1)
        order = torch.tensor(their_order(tok, peer))
        real = t != 0
        worst = max(worst, float((theirs[real][:, order] - mine[real]).abs().max()))
        scale = max(scale, float(mine[real].abs().max()))
    record["max_abs_logprob_diff_transformers"] = worst
    record["max_abs_logprob"] = scale
    for beam in (1, 4):
        same = 0
        for text, mine in zip(sources, ours[beam], strict=True):
            batch = peer_tok([text], return_tensors="pt")
            limit = batch["input_ids"].size(1) + 50
            out = peer.generate(**batch, num_beams=beam, length_penalty=0.0, max_new_tokens=limit)
            same += peer_tok.batch_decode(out, skip_special_tokens=True)[0] == mine
        record[f"transformers_beam{beam}_same"] = same
    converter = shutil.which("ct2-transformers-converter") or str(
        Path(sys.executable).with_name("ct2-transformers-converter")
    )
    try:
        import ctranslate2
    except ImportError:
        record["ctranslate2"] = "not installed"
        return record
    subprocess.run(
        [converter, "--model", str(work / "hf"), "--output_dir", str(work / "ct2")],
        check=True,
        capture_output=True,
    )
    threads = torch.get_num_threads()
    translator = ctranslate2.Translator(str(work / "ct2"), device="cpu", intra_threads=threads)
    tokens = [peer_tok.convert_ids_to_tokens(peer_tok(s)["input_ids"]) for s in sources]
    for beam in (1, 4):
        results, seconds[f"ct2_beam{beam}"] = timed(
            lambda beam=beam: translator.translate_batch(
                tokens, beam_size=beam, length_penalty=0.0, max_batch_size=64
            )
        )
        got = [
            peer_tok.decode(
                peer_tok.convert_tokens_to_ids(r.hypotheses[0]), skip_special_tokens=True
            )
            for r in results
        ]
        record[f"ctranslate2_beam{beam}_same"] = sum(
            a == b for a, b in zip(got, ours[beam], strict=True)
        )
    record["ctranslate2"] = ctranslate2.__version__
    record["sentences_per_s"] = {k: len(sources) / v for k, v in seconds.items()}
    return record


def their_order(tok, peer) -> list[int]:
    """Their id of each of our ids (the export's vocabulary layout)."""
    vocab = json.loads(Path(peer.name_or_path, "vocab.json").read_text())
    return [vocab[tok.sp.id_to_piece(i)] for i in range(tok.vocab_size)]


def to_theirs(tok, peer, ids: torch.Tensor) -> torch.Tensor:
    order = their_order(tok, peer)
    out = torch.tensor([[order[t] for t in row] for row in ids.tolist()])
    out[ids == 0] = peer.config.pad_token_id
    return out


@torch.no_grad()
def minilm_record(hf_dir: Path, work: Path) -> dict:
    import transformers

    transformers.logging.set_verbosity_error()
    import_hf(hf_dir, work / "minilm")
    model, tok = load_model_dir(work / "minilm"), load_tokenizer(work / "minilm")
    peer = transformers.AutoModel.from_pretrained(hf_dir).eval()
    peer_tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    rows = gzip.decompress((ROOT / "data/rotten-tomatoes/test.tsv.gz").read_bytes()).decode()
    texts = [r.split("\t", 1)[1] for r in rows.split("\n") if r.strip()][:256]
    worst, same_ids = 0.0, 0
    for i in range(0, len(texts), 32):
        batch = peer_tok(texts[i : i + 32], return_tensors="pt", padding=True)
        h = peer(**batch).last_hidden_state
        mask = batch["attention_mask"][..., None].float()
        expected = (h * mask).sum(1) / mask.sum(1)
        ids = [x + [EOS] for x in tok.encode(texts[i : i + 32])]
        same_ids += sum(
            tok.vocab_map.to_theirs(x) == row[: int(m.sum())]
            for x, row, m in zip(
                ids, batch["input_ids"].tolist(), batch["attention_mask"], strict=True
            )
        )
        x = pad(ids)
        worst = max(worst, float((model.pool(model.encode(x), x) - expected).abs().max()))
    return {"texts": len(texts), "same_token_ids": same_ids, "max_abs_embedding_diff": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default=str(ROOT / "models/ding-de-en"))
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--minilm", help="a Hugging Face all-MiniLM-L6-v2 directory")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        record = {"marian": marian_record(Path(args.model_dir), args.sentences, Path(tmp))}
        if args.minilm:
            record["minilm"] = minilm_record(Path(args.minilm), Path(tmp))
    record["note"] = "shared 2-core machine; speeds are noisy"
    print(json.dumps(record, indent=2))
    print(f"appended to {write_result('interop', record)}")


if __name__ == "__main__":
    main()
