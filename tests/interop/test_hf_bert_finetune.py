"""An imported BERT sentence encoder used like any other aiayn model: ``aiayn embed`` equals
transformers' mean pooling, and a fine-tune through ``train.init_from`` keeps the imported
WordPiece tokenizer and classifies through ``aiayn classify`` and the Python API."""

import gzip
import io
import json
import random

import pytest
import torch

from aiayn.cli import main
from aiayn.infer.classify import class_probabilities, load_classifier
from aiayn.interop.hf import import_hf
from aiayn.modeldir import load_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.interop.hf_fixtures import bert_model, bert_tokenizer
from tests.tolerance import assert_close_to_scale

transformers = pytest.importorskip("transformers")

TEXTS = ["The cat sat on the mat.", "a big red house", "Dogs ran, fast!", "zebra?", ""]


@pytest.fixture
def encoder_dirs(tmp_path):
    """A random sentence-transformers style BertModel (mean pooling) and its import."""
    hf = tmp_path / "hf"
    bert_tokenizer(hf)
    (hf / "1_Pooling").mkdir()
    (hf / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    theirs = bert_model(hf, "BertModel")
    import_hf(hf, tmp_path / "ours")
    return hf, theirs, tmp_path / "ours"


def mean_pooled(theirs, hf_dir, texts, normalize=False):
    """The reference: transformers' states averaged with the attention mask as weights."""
    enc = transformers.AutoTokenizer.from_pretrained(hf_dir)(
        texts, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        h = theirs(**enc).last_hidden_state  # (B, T, D)
    mask = enc["attention_mask"][..., None].float()  # (B, T, 1)
    pooled = (h * mask).sum(1) / mask.sum(1)  # (B, D)
    return torch.nn.functional.normalize(pooled, dim=-1) if normalize else pooled


@pytest.mark.parametrize("normalize", [False, True])
def test_cli_embed_equals_transformers_mean_pooling(encoder_dirs, normalize, capsys, monkeypatch):
    hf, theirs, ours = encoder_dirs
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(t + "\n" for t in TEXTS)))
    assert main(["embed", str(ours), *(["--normalize"] if normalize else [])]) == 0
    got = torch.tensor([json.loads(line) for line in capsys.readouterr().out.splitlines()])
    expected = mean_pooled(theirs, hf, TEXTS, normalize)
    assert got.shape == expected.shape == (len(TEXTS), 32)
    assert_close_to_scale(got, expected)


def model_overrides(model_dir) -> list[str]:
    """--set lines that repeat an imported model's architecture (what the run may not change)."""
    config = json.loads((model_dir / "config.json").read_text())["model"]
    skip = {"family", "vocab_size", "pad_id", "n_classes", "pooler", "pooling"}
    return [
        f"model.{k}={json.dumps(v)}" for k, v in config.items() if k not in skip and v is not None
    ]


@pytest.fixture
def labelled_corpus(tmp_path):
    rng = random.Random(0)
    good, bad = ["the big red house", "a cat sat"], ["the small blue tree", "a dog ran fast"]
    d = tmp_path / "corpus"
    d.mkdir()
    for split, n in (("train", 96), ("valid", 16), ("test", 16)):
        lines = []
        for _ in range(n):
            label = rng.choice(["pos", "neg"])
            lines.append(f"{label}\t{rng.choice(good if label == 'pos' else bad)}.")
        (d / f"{split}.tsv.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    return d


def test_fine_tuned_import_classifies_like_any_model(
    encoder_dirs, labelled_corpus, tmp_path, capsys, monkeypatch
):
    hf, _, ours = encoder_dirs
    run = tmp_path / "run"
    sets = model_overrides(ours) + [
        'model.pooling="mean"',
        'model.pooler="none"',
        'data.task="classification"',
        f'data.corpus="{labelled_corpus}"',
        "data.lowercase=true",
        "data.max_len=16",
        f'train.init_from="{ours}"',
        'train.schedule="linear"',
        "train.lr_scale=3e-3",
        "train.warmup=2",
        "train.weight_decay=0.01",
        "train.max_tokens=256",
        "train.max_epochs=3",
        "train.label_smoothing=0.0",
        "train.threads=1",
    ]
    argv = ["train", "--out", str(run), "--quiet"] + [x for s in sets for x in ("--set", s)]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["valid_accuracy"] >= 0.9

    # the imported WordPiece tokenizer was kept: no sentencepiece model was trained
    assert not (run / "tokenizer.model").exists()
    assert (run / "model" / "tokenizer.json").read_bytes() == (ours / "tokenizer.json").read_bytes()
    records = [json.loads(x) for x in (run / "metrics.jsonl").open()]
    start = next(r for r in records if r.get("event") == "init_from")
    assert start["fresh"] == ["classifier.1.bias", "classifier.1.weight"]
    tuned, imported = load_model_dir(run / "model"), load_model_dir(ours)
    assert not torch.equal(tuned.embed.token.weight, imported.embed.token.weight)

    # the Python API: [CLS] text [SEP] in the transformers tokenizer's ids, then classify
    model, tokenizer, labels = load_classifier(run / "model")
    assert labels == ["neg", "pos"]
    texts = ["The big red house.", "a dog ran fast.", "a cat sat."]
    slow = transformers.AutoTokenizer.from_pretrained(hf)
    ids = tokenizer.encode(texts, eos=True)
    assert [tokenizer.vocab_map.to_theirs(x) for x in ids] == slow(texts)["input_ids"]
    expected = torch.cat([model.classify(torch.tensor([x])).softmax(-1) for x in ids])
    got_labels, probs = class_probabilities([run / "model"], texts)
    assert_close_to_scale(probs, expected)
    assert [got_labels[i] for i in probs.argmax(-1)] == ["pos", "neg", "pos"]

    monkeypatch.setattr("sys.stdin", io.StringIO("".join(t + "\n" for t in texts)))
    assert main(["classify", str(run / "model")]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows] == ["pos", "neg", "pos"]
    assert [float(r[1]) for r in rows] == [round(float(p.max()), 4) for p in probs]
    assert load_tokenizer(run / "model").folds_case
