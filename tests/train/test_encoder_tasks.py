"""Encoder-only tasks: masking statistics, classification, MLM pretraining then fine-tuning."""

import gzip
import io
import json
import random

import pytest
import torch

from aiayn.cli import main
from aiayn.data.tokenizer import MASK, PAD
from aiayn.train.objectives import mask_tokens


def test_masking_statistics_and_never_specials():
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(5, 1000, (400, 50))
    tokens[:, 40:] = PAD
    tokens[:, 0] = 2  # bos-like special
    inputs, targets = mask_tokens(tokens, 1000, MASK + 1, 0.15, g)
    selected = targets != PAD
    regular = tokens >= MASK + 1
    assert not (selected & ~regular).any()  # padding and specials are never selected
    assert (inputs[~regular] == tokens[~regular]).all()
    rate = selected.sum() / regular.sum()
    assert abs(rate - 0.15) < 0.01
    sel_in, sel_orig = inputs[selected], tokens[selected]
    masked = (sel_in == MASK).float().mean()
    kept = (sel_in == sel_orig).float().mean()
    swapped = 1 - masked - kept
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.02 and abs(swapped - 0.1) < 0.02
    assert torch.equal(targets[selected], tokens[selected])
    assert (inputs[~selected] == tokens[~selected]).all()  # unselected tokens untouched


GOOD = ["a wonderful film", "great acting and a moving story", "loved every minute", "brilliant"]
BAD = ["a dull mess", "boring and far too long", "hated every minute", "terrible"]


@pytest.fixture
def labelled_corpus(tmp_path):
    rng = random.Random(0)
    d = tmp_path / "rt"
    d.mkdir()
    for split, n in (("train", 300), ("valid", 40), ("test", 40)):
        lines = []
        for _ in range(n):
            label = rng.choice(["fresh", "rotten"])
            words = rng.choice(GOOD if label == "fresh" else BAD)
            lines.append(f"{label}\t{words}, {rng.choice(['really', 'truly', 'quite'])}.")
        (d / f"{split}.tsv.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    return d


def args(task, corpus, out, steps, extra=()):
    sets = {
        "model.preset": '"tiny"',
        "model.n_decoder_layers": "0",
        "data.task": f'"{task}"',
        "data.corpus": f'"{corpus}"',
        "data.tokenizer": '"char"',
        "data.max_len": "64",
        "train.max_tokens": "1024",
        "train.warmup": "10",
        "train.lr_scale": "0.1",
        "train.max_steps": str(steps),
        "train.threads": "1",
        "train.label_smoothing": "0.0",
    }
    argv = ["train", "--out", str(out), "--quiet"]
    for k, v in list(sets.items()) + [tuple(e.split("=", 1)) for e in extra]:
        argv += ["--set", f"{k}={v}"]
    return argv


def test_classifier_trains_and_classifies(labelled_corpus, tmp_path, capsys, monkeypatch):
    assert main(args("classification", labelled_corpus, tmp_path / "clf", 60)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["valid_accuracy"] >= 0.9
    monkeypatch.setattr("sys.stdin", io.StringIO("a wonderful film, truly.\nterrible, quite.\n"))
    assert main(["classify", str(tmp_path / "clf" / "model")]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows] == ["fresh", "rotten"]
    assert all(0.5 <= float(r[1]) <= 1.0 for r in rows)


def test_mlm_pretraining_then_fine_tuning(labelled_corpus, tmp_path, capsys):
    assert main(args("mlm", labelled_corpus, tmp_path / "mlm", 30)) == 0
    mlm = json.loads(capsys.readouterr().out)
    assert mlm["valid_loss"] < 3.0  # chance: ln(vocab) ~ 3.4 for these characters
    init = f'train.init_from="{tmp_path / "mlm" / "model"}"'
    assert main(args("classification", labelled_corpus, tmp_path / "ft", 10, [init])) == 0
    capsys.readouterr()
    records = [json.loads(x) for x in (tmp_path / "ft" / "metrics.jsonl").open()]
    start = next(r for r in records if r.get("event") == "init_from")
    assert any(name.startswith("classifier") for name in start["fresh"])
    assert not any(name.startswith("encoder") for name in start["fresh"])


def test_classify_refuses_a_model_without_classifier(
    tmp_path, labelled_corpus, capsys, monkeypatch
):
    assert main(args("mlm", labelled_corpus, tmp_path / "mlm", 2)) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("text\n"))
    assert main(["classify", str(tmp_path / "mlm" / "model")]) == 2
    assert "no text classifier" in capsys.readouterr().err


def test_malformed_labelled_line_is_named(tmp_path, capsys):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "train.tsv.gz").write_bytes(gzip.compress(b"fresh\tgood\nno tab on this line\n"))
    assert main(args("classification", d, tmp_path / "r", 2)) == 2
    assert "train.tsv.gz, line 2" in capsys.readouterr().err
