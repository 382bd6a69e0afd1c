"""The training loop: exact resume and the run directory it writes."""

import json

import pytest
import torch

from aiayn.config import load_run_config
from aiayn.train import checkpoint as ckpt
from aiayn.train.loop import Trainer
from tests.conftest import tiny_run_overrides


def final_weights(run_dir):
    return ckpt.load_checkpoint(ckpt.list_checkpoints(run_dir / "checkpoints")[-1])["model"]


def test_stopped_and_resumed_equals_uninterrupted_bit_for_bit(sample_corpus, tmp_path):
    # dropout on, so the restored RNG state matters too
    common = tiny_run_overrides(sample_corpus) + ["model.dropout=0.2", "train.accum_steps=2"]
    full = load_run_config(None, common + ["train.max_steps=14"])
    Trainer(full, tmp_path / "full", progress=False).fit()

    first = load_run_config(None, common + ["train.max_steps=9"])
    Trainer(first, tmp_path / "split", progress=False).fit()
    again = load_run_config(None, common + ["train.max_steps=14"])
    trainer = Trainer(again, tmp_path / "split", progress=False)
    assert trainer.step == 9
    trainer.fit()

    a, b = final_weights(tmp_path / "full"), final_weights(tmp_path / "split")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_run_directory_holds_everything(sample_corpus, tmp_path):
    run = load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=6, average_last=2))
    summary = Trainer(run, tmp_path, progress=False).fit()
    for name in ("run.json", "tokenizer.model", "metrics.jsonl", "curves.png"):
        assert (tmp_path / name).is_file(), name
    for d in ("model", "best"):
        assert {"config.json", "model.safetensors", "tokenizer.model"} <= {
            p.name for p in (tmp_path / d).iterdir()
        }
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    assert any("tokens_per_s" in r and "padding_efficiency" in r for r in records)
    assert any("valid_loss" in r for r in records)
    assert summary["step"] == 6 and summary["averaged_checkpoints"] == 2
    # the summary, printed and saved with the model, says which weights model/ holds
    steps = [int(p.stem.split("-")[1]) for p in sorted((tmp_path / "checkpoints").iterdir())]
    assert summary["weights"] == (
        f"the average of 2 checkpoints (steps {steps[-2]}, {steps[-1]}), the last ones, as "
        "train.average_last = 2 asks"
    )
    saved = json.loads((tmp_path / "model" / "run.json").read_text())
    assert saved["summary"]["weights"] == summary["weights"] and steps[-1] == 6
    # and run.json records them: the checkpoints averaged, with their steps
    assert saved["weights"] == {
        "kind": "average",
        "checkpoints": [
            {"file": f"checkpoint-{s:08d}.pt", "step": s} for s in (steps[-2], steps[-1])
        ],
    }
    # best/ records the step of the validation that kept it
    best = json.loads((tmp_path / "best" / "run.json").read_text())["weights"]
    valid = [r for r in records if r.get("best")]
    assert best == {
        "kind": "best",
        "step": valid[-1]["step"],
        "valid_loss": valid[-1]["valid_loss"],
    }


@pytest.mark.parametrize("average_last", [0, 2])
def test_the_final_model_is_validated_once_and_its_loss_is_its_own(
    sample_corpus, tmp_path, monkeypatch, average_last
):
    from aiayn import build_model
    from aiayn.modeldir import load_model_dir

    run = load_run_config(
        None, tiny_run_overrides(sample_corpus, max_steps=4, average_last=average_last)
    )
    trainer = Trainer(run, tmp_path, progress=False)
    calls = []
    validate = trainer._valid_loss
    monkeypatch.setattr(trainer, "_valid_loss", lambda m: calls.append(m) or validate(m))
    summary = trainer.fit()
    # the run validates its last step; the final model is validated again only when it is
    # another model (the average of the last checkpoints)
    assert len(calls) == (2 if average_last else 1)
    model = build_model(trainer.model_config)  # the saved weights in the training's layers
    model.load_state_dict(load_model_dir(tmp_path / "model").state_dict())
    assert summary["valid_loss"] == trainer._valid_loss(model)  # the saved model's own loss
    assert not trainer.optimizer.state  # given back at the end; the checkpoint keeps it
    saved = ckpt.load_checkpoint(ckpt.list_checkpoints(tmp_path / "checkpoints")[-1])
    assert "exp_avg" in saved["optimizer"]["state"][0]


def test_init_from_starts_at_a_model_directory(sample_corpus, tmp_path):
    first = load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=4))
    Trainer(first, tmp_path / "a", progress=False).fit()
    overrides = tiny_run_overrides(sample_corpus, max_steps=4)
    overrides.append(f'train.init_from="{tmp_path / "a" / "model"}"')
    trainer = Trainer(load_run_config(None, overrides), tmp_path / "b", progress=False)
    from aiayn.modeldir import load_model_dir

    start = load_model_dir(tmp_path / "a" / "model").state_dict()
    for k, v in trainer.model.state_dict().items():
        assert torch.equal(v, start[k]), k
    assert (tmp_path / "b" / "tokenizer.model").read_bytes() == (
        tmp_path / "a" / "tokenizer.model"
    ).read_bytes()
    wrong = overrides + ["model.d_ff=48"]
    import pytest

    with pytest.raises(ValueError, match="init_from=.*differs from this run's in d_ff"):
        Trainer(load_run_config(None, wrong), tmp_path / "c", progress=False)


class PoisonSteps(torch.nn.Module):
    """Wraps the training objective; the calls numbered in ``poisoned`` return a NaN loss."""

    def __init__(self, objective, poisoned):
        super().__init__()
        self.objective, self.poisoned, self.calls = objective, set(poisoned), 0

    def forward(self, batch, smoothing, pad_id):
        self.calls += 1
        loss, nll, n = self.objective(batch, smoothing, pad_id)
        if self.calls in self.poisoned:
            loss = loss * float("nan")
        return loss, nll, n


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_a_step_with_nan_gradients_is_skipped_and_logged(sample_corpus, tmp_path):
    run = load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=4))
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.objective = PoisonSteps(trainer.objective, poisoned={2})
    groups = trainer._groups(trainer.task.train_batches(0))
    trainer.train_step(groups[0])
    before, adam_before = snapshot(trainer.model), trainer.optimizer.state_dict()["state"]
    trainer.train_step(groups[1])  # NaN: no update
    after = snapshot(trainer.model)
    assert all(torch.equal(before[k], after[k]) for k in before)
    adam_after = trainer.optimizer.state_dict()["state"]
    assert all(
        torch.equal(adam_before[i]["exp_avg"], adam_after[i]["exp_avg"]) for i in adam_before
    )
    trainer.train_step(groups[2])  # finite again: training goes on
    assert any(not torch.equal(after[k], v) for k, v in snapshot(trainer.model).items())
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    assert [r["step"] for r in records if r.get("event") == "skipped_step"] == [2]


def test_nan_gradients_in_a_row_stop_the_run_with_a_clear_error(sample_corpus, tmp_path):
    run = load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=40))
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.objective = PoisonSteps(trainer.objective, poisoned=range(7, 100))
    with pytest.raises(FloatingPointError, match=r"step 11: .* NaN for 5 steps in a row.*lr_scale"):
        trainer.fit()
    assert trainer.step == 10  # 6 good steps, 4 skipped; the 5th skipped one raised
    assert ckpt.list_checkpoints(tmp_path / "checkpoints")  # the step-5 checkpoint stands


class InflateSteps(PoisonSteps):
    """The calls numbered in ``poisoned`` report a training loss far above any plausible one
    (finite gradients: what a diverging run looks like in bf16 or with clipping)."""

    def forward(self, batch, smoothing, pad_id):
        self.calls += 1
        loss, nll, n = self.objective(batch, smoothing, pad_id)
        if self.calls in self.poisoned:
            loss, nll = loss * 1e6, nll * 1e6
        return loss, nll, n


def test_a_loss_out_of_range_stops_the_run_naming_the_last_good_checkpoint(sample_corpus, tmp_path):
    run = load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=40))
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.objective = InflateSteps(trainer.objective, poisoned=range(8, 100))
    with pytest.raises(FloatingPointError, match=r"step 12: the training loss is .* 5 steps in a ro"
                       r"w.*diverged.*Last good checkpoint: .*checkpoint-0+5\.pt.*set aside.*"
                       r"checkpoint-0+10\.pt.*lr_scale"):  # fmt: skip
        trainer.fit()
    # checkpoint 10 was saved while the loss was out of range: set aside, never resumed from
    checkpoints = tmp_path / "checkpoints"
    assert [p.name for p in ckpt.list_checkpoints(checkpoints)] == ["checkpoint-00000005.pt"]
    assert [p.name for p in ckpt.list_diverged(checkpoints)] == ["checkpoint-00000010.diverged.pt"]
    assert not (tmp_path / "model").exists()  # no final model from a diverged run
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    assert [r["step"] for r in records if r.get("event") == "diverged"] == [8, 9, 10, 11, 12]
    (aside,) = [r for r in records if r.get("event") == "set_aside"]
    assert aside["from_step"] == 7 and aside["checkpoints"] == ["checkpoint-00000010.diverged.pt"]


def test_the_checkpoint_whose_weights_gave_the_first_loss_out_of_range_is_set_aside(
    sample_corpus, tmp_path
):
    # the loss of step 11 is that of the weights step 10 wrote: checkpoint 10 is not good
    run = load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=40))
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.objective = InflateSteps(trainer.objective, poisoned=range(11, 100))
    with pytest.raises(FloatingPointError, match=r"Last good checkpoint: .*checkpoint-0+5\.pt"):
        trainer.fit()
    checkpoints = tmp_path / "checkpoints"
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(checkpoints)] == [5]
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_diverged(checkpoints)] == [10]


class InflateThenPoison(PoisonSteps):
    """Calls in ``inflated`` report a loss out of range, calls in ``poisoned`` a NaN one."""

    def __init__(self, objective, inflated, poisoned):
        super().__init__(objective, poisoned)
        self.inflated = set(inflated)

    def forward(self, batch, smoothing, pad_id):
        loss, nll, n = super().forward(batch, smoothing, pad_id)
        if self.calls in self.inflated:
            loss, nll = loss * 1e6, nll * 1e6
        return loss, nll, n


def test_a_loss_out_of_range_then_nan_gradients_set_aside_from_the_first(sample_corpus, tmp_path):
    # steps 8 and 9 out of range, 10 on not finite: the trouble began with step 7's weights
    overrides = tiny_run_overrides(sample_corpus, max_steps=40, checkpoint_every=1)
    run = load_run_config(None, overrides + ["train.keep_checkpoints=20"])
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.objective = InflateThenPoison(trainer.objective, {8, 9}, range(10, 100))
    with pytest.raises(FloatingPointError, match=r"NaN for 5 .*Last good checkpoint: .*-0+6\.pt"):
        trainer.fit()
    checkpoints = tmp_path / "checkpoints"
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(checkpoints)][-1] == 6
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_diverged(checkpoints)] == [
        7,
        8,
        9,
        10,
        11,
        12,
        13,
    ]


def test_checkpoints_saved_while_diverging_do_not_push_out_the_last_good_one(
    sample_corpus, tmp_path
):
    # one checkpoint a step, two kept: the four saved while the loss was out of range would
    # have deleted every good one
    overrides = tiny_run_overrides(sample_corpus, max_steps=40, checkpoint_every=1)
    run = load_run_config(None, overrides + ["train.keep_checkpoints=2"])
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.objective = InflateSteps(trainer.objective, poisoned=range(8, 100))
    with pytest.raises(FloatingPointError, match=r"Last good checkpoint: .*checkpoint-0+6\.pt"):
        trainer.fit()
    checkpoints = tmp_path / "checkpoints"
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(checkpoints)] == [5, 6]
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_diverged(checkpoints)] == [7, 8, 9, 10, 11]


def test_one_checkpoint_kept_still_leaves_a_good_one_when_the_newest_proves_bad(
    sample_corpus, tmp_path
):
    # keep_checkpoints = 1, a checkpoint every 5 steps, the loss out of range from step 11:
    # checkpoint 10's weights are bad, and 5 must not have been pruned when 10 was written
    overrides = tiny_run_overrides(sample_corpus, max_steps=40, checkpoint_every=5)
    run = load_run_config(None, overrides + ["train.keep_checkpoints=1"])
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.objective = InflateSteps(trainer.objective, poisoned=range(11, 100))
    with pytest.raises(FloatingPointError, match=r"Last good checkpoint: .*checkpoint-0+5\.pt"):
        trainer.fit()
    checkpoints = tmp_path / "checkpoints"
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(checkpoints)] == [5]
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_diverged(checkpoints)] == [10]


def test_a_run_with_no_good_checkpoint_says_so_and_starts_afresh(sample_corpus, tmp_path, capsys):
    run = load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=40))
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.objective = InflateSteps(trainer.objective, poisoned=range(3, 100))
    with pytest.raises(FloatingPointError, match=r"Last good checkpoint: none .*starts afresh"):
        trainer.fit()
    assert [p.name for p in ckpt.list_diverged(tmp_path / "checkpoints")] == [
        "checkpoint-00000005.diverged.pt"
    ]
    again = Trainer(load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=3)), tmp_path,
                    progress=False)  # fmt: skip
    assert again.step == 0  # not the diverged checkpoint 5
    assert "starting afresh" in capsys.readouterr().err
    again.fit()
    assert not ckpt.list_diverged(tmp_path / "checkpoints")  # that attempt's are gone


@pytest.mark.parametrize(
    ("settings", "suggested", "not_suggested"),
    [
        ([], ["lr_scale", "clip_norm"], ["fp32"]),  # fp32 already
        (["train.clip_norm=1.0"], ["lr_scale"], ["clip_norm", "fp32"]),
        (['train.precision="bf16"'], ["clip_norm", "fp32"], []),
    ],
)
def test_the_advice_names_only_settings_that_would_change_something(
    sample_corpus, tmp_path, settings, suggested, not_suggested
):
    overrides = tiny_run_overrides(sample_corpus, max_steps=40) + ['train.precision="fp32"']
    run = load_run_config(None, overrides + settings)
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.objective = PoisonSteps(trainer.objective, poisoned=range(2, 100))
    with pytest.raises(FloatingPointError, match="NaN for 5 steps") as stopped:
        trainer.fit()
    advice = str(stopped.value).split("To go on")[1]
    assert all(word in advice for word in suggested), advice
    assert not any(word in advice for word in not_suggested), advice


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_a_diverging_run_stops_in_every_precision(sample_corpus, tmp_path, precision):
    # lr 1e5 with clipping: in bf16 (and with clipping in fp32) the gradients can stay finite
    overrides = tiny_run_overrides(sample_corpus, max_steps=30, lr_scale=100000, clip_norm=1.0)
    run = load_run_config(None, overrides + [f'train.precision="{precision}"'])
    with pytest.raises(FloatingPointError, match=r"the run (diverged and )?stops"):
        Trainer(run, tmp_path, progress=False).fit()
    assert not (tmp_path / "model").exists()


def test_a_validation_loss_out_of_range_stops_the_run(sample_corpus, tmp_path):
    run = load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=6, valid_every=3))
    trainer = Trainer(run, tmp_path, progress=False)
    trainer._valid_loss = lambda model: 1e9
    with pytest.raises(FloatingPointError, match=r"step 3: the validation loss is 1e\+09"):
        trainer.fit()


def test_a_run_resumed_with_another_learning_rate_steps_at_the_new_one(sample_corpus, tmp_path):
    """The optimizer's state holds the rate of the step after the checkpoint: a run resumed
    with a lower train.lr_scale (after it diverged) must not take that step at the old rate."""
    from aiayn.train.optim import noam_lr

    Trainer(load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=5)), tmp_path,
            progress=False).fit()  # fmt: skip
    # the same settings: the schedule is unchanged, the saved rate stands as it was saved
    same = Trainer(load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=5)),
                   tmp_path, progress=False)  # fmt: skip
    saved = ckpt.load_checkpoint(ckpt.list_checkpoints(tmp_path / "checkpoints")[-1])
    assert same.optimizer.param_groups[0]["lr"] == saved["optimizer"]["param_groups"][0]["lr"]
    same.close()
    lower = load_run_config(None, tiny_run_overrides(sample_corpus, max_steps=9, lr_scale=0.5))
    trainer = Trainer(lower, tmp_path, progress=False)
    d_model = trainer.model_config.d_model
    assert trainer.optimizer.param_groups[0]["lr"] == noam_lr(6, d_model, 20, 0.5)
    trainer.close()
