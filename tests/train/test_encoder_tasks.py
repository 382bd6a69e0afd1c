"""Encoder-only tasks: masking statistics, classification, MLM pretraining then fine-tuning."""

import gzip
import io
import json
import random

import pytest
import torch

from aiayn.cli import main
from aiayn.data.tokenizer import MASK, PAD
from aiayn.errors import UserError
from aiayn.modeldir import load_config
from aiayn.train.objectives import mask_tokens
from tests.tolerance import assert_close_to_scale, assert_differs_at_scale


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
    assert abs(rate - 0.15) < 0.01  # absolute: a sampling margin on a frequency
    sel_in, sel_orig = inputs[selected], tokens[selected]
    masked = (sel_in == MASK).float().mean()
    kept = (sel_in == sel_orig).float().mean()
    swapped = 1 - masked - kept
    # absolute: sampling margins on frequencies
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
    # int8: the same labels, and embed reads the same flag
    monkeypatch.setattr("sys.stdin", io.StringIO("a wonderful film, truly.\nterrible, quite.\n"))
    assert main(["classify", str(tmp_path / "clf" / "model"), "--quantize", "int8"]) == 0
    assert [r.split("\t")[0] for r in capsys.readouterr().out.splitlines()] == ["fresh", "rotten"]
    monkeypatch.setattr("sys.stdin", io.StringIO("a wonderful film, truly.\n"))
    assert main(["embed", str(tmp_path / "clf" / "model"), "--quantize", "int8"]) == 0
    d_model = load_config(tmp_path / "clf" / "model").d_model
    assert len(json.loads(capsys.readouterr().out)) == d_model


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


def test_extra_labelled_splits_join_training_only(labelled_corpus, tmp_path, capsys):
    from aiayn.config import RunConfig
    from aiayn.data.tokenizer import CharTokenizer
    from aiayn.train.tasks import make_task

    (labelled_corpus / "lexicon.tsv.gz").write_bytes(gzip.compress(b"fresh\tgood\nrotten\tbad\n"))
    run = RunConfig.from_dict(
        {
            "data": {
                "task": "classification",
                "corpus": str(labelled_corpus),
                "extra_train": ["lexicon"],
                "train_repeat": 2,
            }
        }
    )
    task = make_task(run)
    task.load(CharTokenizer.train([text for text, _ in task.train_pairs]))
    assert len(task.train.ids) == 2 * 300 + 2 and len(task.valid.ids) == 40
    assert task.train.labels[-2:].tolist() == [0, 1]  # fresh, rotten: the lexicon comes last

    (labelled_corpus / "lexicon.tsv.gz").write_bytes(gzip.compress(b"positive\tgood\n"))
    extra = ['data.extra_train=["lexicon"]']
    assert main(args("classification", labelled_corpus, tmp_path / "r", 2, extra)) == 2
    err = capsys.readouterr().err
    assert "lexicon.tsv.gz: label(s) positive are not in" in err and "fresh, rotten" in err
    assert not (tmp_path / "r").exists()


def test_classify_ensemble_long_texts_and_an_empty_one_refused(
    labelled_corpus, tmp_path, capsys, monkeypatch
):
    from aiayn.infer.classify import class_probabilities

    for seed in (1, 2):
        extra = [f"train.seed={seed}", "data.max_len=16", "model.max_len=16"]
        out = tmp_path / f"clf{seed}"
        assert main(args("classification", labelled_corpus, out, 20, extra)) == 0
    capsys.readouterr()
    dirs = [tmp_path / "clf1" / "model", tmp_path / "clf2" / "model"]
    texts = ["brilliant.", "so-so", "terrible " * 40]  # the last one is truncated
    with pytest.raises(UserError, match="text 2 is empty: there is nothing to classify"):
        class_probabilities(dirs, ["brilliant.", ""])  # no class is an answer for nothing
    labels, both = class_probabilities(dirs, texts)
    _, one = class_probabilities(dirs[:1], texts)
    _, two = class_probabilities(dirs[1:], texts)
    assert labels == ["fresh", "rotten"] and both.shape == (3, 2)
    assert_close_to_scale(both, (one + two) / 2)  # the ensemble averages probabilities
    assert_differs_at_scale(one, two)  # two different models

    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(texts) + "\n"))
    assert main(["classify", *map(str, dirs)]) == 0
    captured = capsys.readouterr()
    rows = [line.split("\t") for line in captured.out.splitlines()]
    assert len(rows) == 3 and all(r[0] in labels for r in rows)
    assert [float(r[1]) for r in rows] == [round(float(p.max()), 4) for p in both]
    assert captured.err.count("1 texts truncated to 16 tokens") == 2  # once per model

    run_file = dirs[1] / "run.json"
    run_file.write_text(run_file.read_text().replace('"rotten"', '"stale"'))
    monkeypatch.setattr("sys.stdin", io.StringIO("brilliant.\n"))
    assert main(["classify", *map(str, dirs)]) == 2
    assert "needs the same labels" in capsys.readouterr().err


def test_lowercase_reaches_the_tokenizer_and_must_match_a_pretrained_one(
    labelled_corpus, tmp_path, capsys
):
    from aiayn.config import RunConfig
    from aiayn.modeldir.tokenizer_files import load_tokenizer
    from aiayn.train.tasks import make_task

    for task_name in ("classification", "mlm"):
        data = {"task": task_name, "corpus": str(labelled_corpus), "vocab_size": 300}
        plain = make_task(RunConfig.from_dict({"data": data})).train_tokenizer()
        folded = make_task(RunConfig.from_dict({"data": data | {"lowercase": True}}))
        assert folded.train_tokenizer().folds_case and not plain.folds_case

    bpe = ['data.tokenizer="bpe"', "data.vocab_size=300"]
    assert main(args("mlm", labelled_corpus, tmp_path / "mlm", 2, bpe)) == 0
    pretrained = tmp_path / "mlm" / "model"
    assert not load_tokenizer(pretrained).folds_case
    fine_tune = bpe + [f'train.init_from="{pretrained}"', "data.lowercase=true"]
    assert main(args("classification", labelled_corpus, tmp_path / "ft", 2, fine_tune)) == 2
    err = capsys.readouterr().err
    assert f"the tokenizer of train.init_from {pretrained} keeps case" in err
    assert "set data.lowercase = false" in err and not (tmp_path / "ft").exists()


@pytest.mark.parametrize(
    "data",
    [
        {"tokenizer": "char"},
        {"task": "translation"},
        {"task": "lm"},
        {"lowercase": "yes"},
    ],
)
def test_lowercase_needs_bpe_and_a_labelled_task(data):
    from aiayn.config import RunConfig

    base = {"task": "classification", "tokenizer": "bpe", "lowercase": True}
    with pytest.raises(ValueError, match="data.lowercase"):
        RunConfig.from_dict({"data": base | data})


def test_linear_schedule_to_the_end_of_the_epochs_and_best_by_accuracy(
    labelled_corpus, tmp_path, capsys
):
    extra = ['train.schedule="linear"', "train.max_epochs=2", "train.log_every=1"]
    extra += ["train.max_steps=0", "train.warmup=2", "train.weight_decay=0.01"]
    extra += ['train.keep_best="accuracy"', "train.valid_every=3", "train.lr_scale=0.003"]
    assert main(args("classification", labelled_corpus, tmp_path / "r", 0, extra)) == 0
    summary = json.loads(capsys.readouterr().out)
    records = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").open()]
    logged = [r["lr"] for r in records if "lr" in r]  # the rate of the step that follows
    total = summary["step"]
    assert summary["epoch"] == 2 and len(logged) == total > 4
    peak = 0.003
    expected = [peak * max(0.0, (total - s) / (total - 2)) for s in range(2, total + 2)]
    assert_close_to_scale(logged, expected, rel=1e-9)
    assert logged[-1] == 0.0

    valid = [r for r in records if "valid_accuracy" in r and "event" not in r]
    assert len(valid) >= 4
    record = -1.0
    for r in valid:  # best/ is written whenever the accuracy beats every earlier one
        assert r.get("best", False) == (r["valid_accuracy"] > record)
        record = max(record, r["valid_accuracy"])
    assert summary["best_valid_accuracy"] == record and "best_valid_loss" not in summary


def test_best_by_accuracy_needs_a_classifier():
    from aiayn.config import RunConfig

    with pytest.raises(ValueError, match="keep_best = 'accuracy' needs data.task"):
        RunConfig.from_dict({"data": {"task": "mlm"}, "train": {"keep_best": "accuracy"}})
    with pytest.raises(ValueError, match="train.keep_best must be one of loss, accuracy"):
        RunConfig.from_dict({"train": {"keep_best": "bleu"}})
