"""A run directory stays whole: one training at a time, a polite stop saves and resumes exactly,
temporary files and replayed metrics are cleaned up, and changed settings are refused."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from aiayn.cli import main
from aiayn.config import load_run_config
from aiayn.errors import TrainingInterrupted, UserError
from aiayn.train import checkpoint as ckpt
from aiayn.train.loop import Trainer
from aiayn.train.rundir import LOCK_FILE, repair_metrics
from tests.conftest import tiny_run_overrides, write_sample_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_sample_corpus(tmp_path_factory.mktemp("rundir") / "corpus")


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """A finished 6-step run (checkpoints at 5 and 6)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    Trainer(config(corpus, max_steps=6, log_every=1), out, progress=False).fit()
    return out


def config(corpus, *extra, **train):
    return load_run_config(None, tiny_run_overrides(corpus, **train) + list(extra))


def copy(run, tmp_path):
    return shutil.copytree(run, tmp_path / "run")


def steps_logged(run):
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in records if "loss" in r]


@pytest.fixture
def signals_as_a_terminal_gives_them():
    """SIGINT raising KeyboardInterrupt and SIGTERM ending the process, whatever this process
    inherited: started in the background by a shell without job control (``pytest &`` in a
    script, a CI runner), it ignores SIGINT, and so keeps a training that stops on it from
    installing its handler (as under nohup). The inherited handlers are restored after."""
    inherited = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, handler in inherited.items():
        signal.signal(s, handler)


def interrupt_at(monkeypatch, step, signum=signal.SIGINT):
    """Send ``signum`` to this process during optimizer step ``step``."""
    original = Trainer.train_step

    def train_step(self, group):
        if self.step + 1 == step:
            os.kill(os.getpid(), signum)
        return original(self, group)

    monkeypatch.setattr(Trainer, "train_step", train_step)


# --------------------------------------------------------------------------- one at a time


def test_a_second_training_is_refused_naming_the_first(corpus, tmp_path):
    first = Trainer(config(corpus, max_steps=2), tmp_path, progress=False)
    lock = json.loads((tmp_path / LOCK_FILE).read_text())
    assert lock["pid"] == os.getpid() and lock["host"]
    before = (tmp_path / "run.json").read_bytes()
    with pytest.raises(UserError, match=f"in use by another training \\(pid {os.getpid()} on host"):
        Trainer(config(corpus, "train.seed=7", max_steps=2), tmp_path, progress=False)
    assert (tmp_path / "run.json").read_bytes() == before  # the refused one wrote nothing
    first.fit()
    assert not (tmp_path / LOCK_FILE).exists()  # given back
    Trainer(config(corpus, max_steps=3), tmp_path, progress=False).fit()


def test_the_lock_of_a_dead_training_is_taken_over(corpus, tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": int(dead.stdout), "host": "elsewhere"}))
    with pytest.warns(UserWarning, match="taking over the lock left by a training that no longer"):
        Trainer(config(corpus, max_steps=1), tmp_path, progress=False).fit()


# --------------------------------------------------------------------------- polite stops


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_the_current_step_and_resumes_bit_for_bit(
    corpus, tmp_path, monkeypatch, signum, signals_as_a_terminal_gives_them
):
    common = ["model.dropout=0.2", "train.accum_steps=2", "train.checkpoint_every=100"]
    Trainer(config(corpus, *common, max_steps=9), tmp_path / "full", progress=False).fit()
    interrupt_at(monkeypatch, 4, signum)
    with pytest.raises(TrainingInterrupted, match="stopped at step 4, saved .*checkpoint-00000004"):
        Trainer(config(corpus, *common, max_steps=9), tmp_path / "split", progress=False).fit()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    monkeypatch.undo()
    again = Trainer(config(corpus, *common, max_steps=9), tmp_path / "split", progress=False)
    assert again.step == 4
    again.fit()
    a, b = (
        ckpt.load_checkpoint(ckpt.list_checkpoints(d / "checkpoints")[-1])["model"]
        for d in (tmp_path / "full", tmp_path / "split")
    )
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert steps_logged(tmp_path / "split") == steps_logged(tmp_path / "full")


def test_the_command_line_says_how_to_resume(
    corpus, tmp_path, monkeypatch, capsys, signals_as_a_terminal_gives_them
):
    interrupt_at(monkeypatch, 3)
    argv = ["train", "--out", str(tmp_path), "--quiet"]
    for o in tiny_run_overrides(corpus, max_steps=9):
        argv += ["--set", o]
    assert main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("aiayn train: SIGINT: stopped at step 3, saved ")
    assert "resume with: aiayn train --out" in err and "train.max_steps=9" in err


def test_an_ignored_sigint_stays_ignored_and_sigterm_still_stops(
    corpus, tmp_path, monkeypatch, signals_as_a_terminal_gives_them
):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as nohup or `aiayn train &` in a script
    interrupt_at(monkeypatch, 2, signal.SIGINT)
    Trainer(config(corpus, max_steps=3), tmp_path / "a", progress=False).fit()  # not stopped
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    monkeypatch.undo()
    interrupt_at(monkeypatch, 2, signal.SIGTERM)
    with pytest.raises(TrainingInterrupted, match="SIGTERM: stopped at step 2"):
        Trainer(config(corpus, max_steps=3), tmp_path / "b", progress=False).fit()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_sigterm_from_outside_stops_a_training_process(corpus, tmp_path):
    argv = ["train", "--out", str(tmp_path), "--quiet"]
    for o in tiny_run_overrides(corpus, max_steps=100000, log_every=1, checkpoint_every=100000):
        argv += ["--set", o]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiayn.cli", *argv], env=env, stderr=subprocess.PIPE
    )
    metrics = tmp_path / "metrics.jsonl"
    deadline = time.monotonic() + 600  # a loaded 2-core host takes long to start a process
    while not (metrics.exists() and '"loss"' in metrics.read_text()):
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "no step logged in 600 s"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # once training runs: its handler is installed
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "Traceback" not in err.decode() and "resume with: aiayn train" in err.decode()
    saved = ckpt.list_checkpoints(tmp_path / "checkpoints")
    assert saved and int(saved[-1].name[11:19]) >= max(steps_logged(tmp_path))


# --------------------------------------------------------------------------- clean restarts


def test_temporary_files_of_killed_writes_are_removed(corpus, trained, tmp_path):
    run = copy(trained, tmp_path)
    stale = [
        run / "checkpoints/.checkpoint-00000009.pt.k1l2m3n4.tmp",
        run / ".run.json.a1b2c3d4.tmp",
    ]
    for path in stale:
        path.write_bytes(b"half")
    Trainer(config(corpus, max_steps=6), run, progress=False).close()
    assert not any(p.exists() for p in stale)


def test_replayed_steps_are_logged_once_and_a_cut_line_is_dropped(corpus, trained, tmp_path):
    run = copy(trained, tmp_path)
    (run / "checkpoints/checkpoint-00000006.pt").unlink()  # as if killed after logging step 6
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 7, "loss": 1.')  # and in the middle of a line
    with pytest.warns(UserWarning, match="metrics.jsonl: dropped 1 line"):
        trainer = Trainer(config(corpus, max_steps=8, log_every=1), run, progress=False)
    trainer.fit()
    assert steps_logged(run) == list(range(1, 9))


def test_repair_metrics_keeps_records_up_to_the_step(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"event": "init_from"}\n{"step": 3}\n[1]\n{"step": 2')
    with pytest.warns(UserWarning, match="dropped 2 line"):
        repair_metrics(path, 2)
    assert path.read_text() == '{"step": 1}\n{"event": "init_from"}\n'


# --------------------------------------------------------------------------- changed settings


def test_a_tokenizer_of_another_size_is_refused(corpus, trained, tmp_path):
    run = copy(trained, tmp_path)
    from aiayn.data.tokenizer import Tokenizer

    other = Tokenizer.train(
        ["Ein kurzer Satz mit Wörtern.", "A short sentence with words."] * 50, 300
    )
    other.save(run)
    with pytest.raises(
        UserError,
        match=r"does not fit this model.*\(300, 32\) here .*tokenizer\.model, has a vocabulary of 300",
    ):
        Trainer(config(corpus, max_steps=8), run, progress=False)


def test_a_tokenizer_of_the_same_size_but_other_pieces_is_refused(corpus, trained, tmp_path):
    run = copy(trained, tmp_path)
    from aiayn.data.files import load_split
    from aiayn.data.tokenizer import Tokenizer

    size = Tokenizer.load(run).vocab_size
    texts = [t.upper() for pair in load_split(corpus, "train") for t in pair]
    Tokenizer.train(texts, size).save(run)  # as many pieces, other ones
    with pytest.raises(
        UserError, match="is not the tokenizer checkpoint-00000006.pt was trained with"
    ):
        Trainer(config(corpus, max_steps=8), run, progress=False)


def test_a_changed_model_is_refused_by_the_checkpoint_even_without_run_json(
    corpus, trained, tmp_path
):
    run = copy(trained, tmp_path)
    (run / "run.json").unlink()
    with pytest.raises(
        UserError,
        match=r"different \[model\] config \(by its last checkpoint checkpoint-00000006.pt; differs in: d_ff 64 -> 48",
    ):
        Trainer(config(corpus, "model.d_ff=48", max_steps=8), run, progress=False)


def test_a_damaged_run_json_is_named_when_resuming_rewrites_it(corpus, trained, tmp_path):
    run = copy(trained, tmp_path)
    (run / "run.json").write_text("{oops")
    with pytest.warns(UserWarning, match=r"run.json: not valid JSON.*checkpoint-00000006.pt"):
        trainer = Trainer(config(corpus, max_steps=8), run, progress=False)
    trainer.close()
    assert json.loads((run / "run.json").read_text())["model"]["d_ff"] == 64


def test_a_model_family_that_does_not_fit_the_task_is_refused(corpus, tmp_path):
    with pytest.raises(
        UserError, match="model.family = 'decoder-only' does not fit data.task = 'translation'"
    ):
        Trainer(
            config(corpus, 'model.family="decoder-only"', max_steps=2),
            tmp_path / "r",
            progress=False,
        )
    assert not (tmp_path / "r").exists()  # a failed start leaves no directory behind


def test_a_tokenizer_no_checkpoint_uses_is_rebuilt_for_new_settings(corpus, trained, tmp_path):
    run = copy(trained, tmp_path)
    shutil.rmtree(run / "checkpoints")
    with pytest.warns(UserWarning, match=r"made with other settings \(vocab_size changed\)"):
        trainer = Trainer(config(corpus, "data.vocab_size=350", max_steps=1), run, progress=False)
    assert trainer.tokenizer.vocab_size == 350
    trainer.close()


def test_a_checkpoint_of_another_model_is_named(corpus, trained, tmp_path):
    run = copy(trained, tmp_path)
    state = ckpt.load_checkpoint(run / "checkpoints/checkpoint-00000006.pt")
    state["model"] = {k: v[..., :1] if v.dim() else v for k, v in state["model"].items()}
    torch.save(state, run / "checkpoints/checkpoint-00000007.pt")
    with pytest.raises(UserError, match="checkpoint-00000007.pt does not fit this model"):
        Trainer(config(corpus, max_steps=8), run, progress=False)


def test_a_model_directory_or_another_folder_is_not_trained_into(corpus, trained, tmp_path):
    model = shutil.copytree(trained / "model", tmp_path / "model")
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    with pytest.raises(UserError, match="is a model directory, not a training run.*init_from"):
        Trainer(config(corpus, max_steps=1), model, progress=False)
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before
    (tmp_path / "notes" / "model").mkdir(parents=True)
    with pytest.raises(UserError, match="holds no training run, but model, which training would"):
        Trainer(config(corpus, max_steps=1), tmp_path / "notes", progress=False)


def test_extra_train_must_be_a_list_of_split_names(corpus):
    with pytest.raises(UserError, match="data.extra_train must be a list of split names"):
        config(corpus, 'data.extra_train="phrases"')
