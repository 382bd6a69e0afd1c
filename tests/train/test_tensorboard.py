"""train.tensorboard: the metrics of metrics.jsonl as TensorBoard event files, read back with
TensorBoard's own reader; a resumed run's replayed steps appear once."""

import json
import shutil

import pytest

from aiayn.config import load_run_config
from aiayn.errors import UserError
from aiayn.train.loop import Trainer
from tests.conftest import tiny_run_overrides, write_sample_corpus
from tests.tolerance import assert_close_to_scale

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_sample_corpus(tmp_path_factory.mktemp("tb") / "corpus")


def config(corpus, **train):
    overrides = tiny_run_overrides(corpus, log_every=1, **train) + ["train.tensorboard=true"]
    return load_run_config(None, overrides)


def fit(run_config, out):
    trainer = Trainer(run_config, out, progress=False)
    try:
        trainer.fit()
    finally:
        trainer.close()


def scalars(run) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def logged(run, key) -> list[tuple[int, float]]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r[key]) for r in records if key in r and "event" not in r]


def test_the_logged_metrics_are_tensorboard_scalars(corpus, tmp_path):
    run = tmp_path / "run"
    fit(config(corpus, max_steps=6, valid_every=3), run)
    got = scalars(run)
    assert {"train/loss", "train/lr", "train/tokens_per_s", "valid/valid_loss"} <= set(got)
    for tag, key in (
        ("train/loss", "loss"),
        ("train/lr", "lr"),
        ("valid/valid_loss", "valid_loss"),
    ):
        want = logged(run, key)
        assert [s for s, _ in got[tag]] == [s for s, _ in want]
        assert_close_to_scale([v for _, v in got[tag]], [v for _, v in want], 1e-6)


def test_a_resumed_run_shows_each_step_once(corpus, tmp_path):
    run = tmp_path / "run"
    fit(config(corpus, max_steps=6, checkpoint_every=4), run)
    (run / "checkpoints/checkpoint-00000006.pt").unlink()  # as if killed after step 6
    shutil.rmtree(run / "model")
    fit(config(corpus, max_steps=8, checkpoint_every=4), run)  # resumes at 4: 5, 6 again
    steps = [s for s, _ in scalars(run)["train/loss"]]
    assert steps == list(range(1, 9))
    assert [s for s, _ in logged(run, "loss")] == steps


def test_without_tensorboard_installed_the_error_says_how(corpus, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(UserError, match=r"pip install 'aiayn\[tensorboard\]'"):
        Trainer(config(corpus, max_steps=2), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
