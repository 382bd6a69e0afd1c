"""Data-parallel training under torchrun, device and precision choices."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from aiayn.config import load_run_config
from aiayn.model import build_model
from aiayn.train import checkpoint as ckpt
from aiayn.train import compiling
from aiayn.train import distributed as ddp
from aiayn.train.loop import Trainer
from tests.conftest import tiny_run_overrides
from tests.tolerance import assert_close_to_scale

NO_DROPOUT = ["model.dropout=0.0", "model.attention_dropout=0.0", "model.embedding_dropout=0.0"]


def last_weights(run_dir):
    return ckpt.load_checkpoint(ckpt.list_checkpoints(run_dir / "checkpoints")[-1])["model"]


def torchrun(overrides, out, nproc=2):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += [f"--nproc_per_node={nproc}", "-m", "aiayn.cli", "train", "--out", str(out), "--quiet"]
    for o in overrides:
        cmd += ["--set", o]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow  # torchrun starts two processes (~25 s)
def test_two_processes_equal_one_process_with_the_same_global_batch(sample_corpus, tmp_path):
    common = tiny_run_overrides(sample_corpus) + NO_DROPOUT + ["train.valid_every=3"]
    # one process: 2 batches accumulated per step; two processes: 1 batch each per step
    single = load_run_config(None, common + ["train.accum_steps=2", "train.max_steps=6"])
    Trainer(single, tmp_path / "single", progress=False).fit()

    (tmp_path / "ddp").mkdir()
    shutil.copy(tmp_path / "single" / "tokenizer.model", tmp_path / "ddp")
    torchrun(common + ["train.max_steps=3"], tmp_path / "ddp")  # stopped after 3 steps ...
    done = torchrun(common + ["train.max_steps=6"], tmp_path / "ddp")  # ... and resumed

    a, b = last_weights(tmp_path / "single"), last_weights(tmp_path / "ddp")
    assert a.keys() == b.keys()
    for k in a:  # all-reduce sums in another order than accumulation: compare to scale
        assert_close_to_scale(b[k], a[k], msg=k)
    assert json.loads(done.stdout)["step"] == 6  # only rank 0 prints the summary

    records = [json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").open()]
    resumes = [r for r in records if r.get("event") == "resume"]
    assert [r["step"] for r in resumes] == [3]  # rank 0 alone writes the log
    state = ckpt.load_checkpoint(ckpt.list_checkpoints(tmp_path / "ddp" / "checkpoints")[-1])
    assert len(state["rng_ranks"]) == 2


def test_each_rank_takes_its_share_of_every_step(sample_corpus, tmp_path):
    run = load_run_config(None, tiny_run_overrides(sample_corpus, accum_steps=2, max_steps=1))
    trainer = Trainer(run, tmp_path, progress=False)
    trainer.ctx = ddp.Context(rank=1, world_size=3)
    groups = trainer._groups(list(range(20)))
    assert [len(g) for g in groups] == [6, 6, 6]  # the incomplete last group is dropped
    assert groups[0][trainer.ctx.rank :: trainer.ctx.world_size] == [1, 4]


def test_bf16_autocast_trains_on_the_cpu(sample_corpus, tmp_path):
    overrides = tiny_run_overrides(sample_corpus, max_steps=3, precision='"bf16"')
    trainer = Trainer(load_run_config(None, overrides), tmp_path, progress=False)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    summary = trainer.fit()
    assert trainer.ctx.precision == "bf16"
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    [event] = [r for r in records if r.get("event") == "precision"]
    assert event["precision"] == "bf16" and event["why"] == "train.precision = bf16"
    assert json.loads((tmp_path / "run.json").read_text())["precision"] == "bf16"
    assert json.loads((tmp_path / "model" / "run.json").read_text())["precision"] == "bf16"
    assert torch.isfinite(torch.tensor(summary["valid_loss"]))
    after = trainer.model.state_dict()
    assert all(after[k].dtype == torch.float32 for k in after)  # master weights stay fp32
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_device_and_precision_choices(monkeypatch):
    cpu = torch.device("cpu")
    assert ddp.pick_device("cpu") == cpu
    assert ddp.pick_precision("auto", cpu) == ("bf16" if ddp.cpu_bf16() else "fp32")
    monkeypatch.setattr(ddp, "cpu_bf16", lambda: None)  # a CPU without bf16 units
    assert ddp.pick_precision("auto", cpu) == "fp32"
    assert "no bf16 units" in ddp.precision_reason("auto", cpu, "fp32")
    monkeypatch.setattr(ddp, "cpu_bf16", lambda: "avx512_bf16")
    assert ddp.pick_precision("auto", cpu) == "bf16"
    assert ddp.pick_precision("fp32", cpu) == "fp32"  # a choice stays the user's
    assert "this CPU has avx512_bf16 units" in ddp.precision_reason("auto", cpu, "bf16")
    with pytest.raises(ValueError, match="fp16 needs a CUDA device"):
        ddp.pick_precision("fp16", cpu)
    with pytest.raises(ValueError, match="train.precision must be one of"):
        ddp.pick_precision("fp8", cpu)
    if torch.cuda.is_available():
        assert ddp.pick_device("auto").type == "cuda"
    else:
        assert ddp.pick_device("auto") == cpu
        with pytest.raises(ValueError, match="no CUDA device"):
            ddp.pick_device("cuda")
    with pytest.raises(ValueError, match="train.device"):
        load_run_config(None, ['train.device="tpu"'])


@pytest.mark.slow  # torch.compile of a training step (~30 s)
def test_compiled_training_step_equals_eager(sample_corpus, tmp_path):
    overrides = tiny_run_overrides(sample_corpus, max_steps=1, compile="true") + NO_DROPOUT
    trainer = Trainer(load_run_config(None, overrides), tmp_path, progress=False)
    batch = trainer.task.train_batches(0)[0]
    plain = build_model(trainer.model.config)  # the trainer's layers are compiled in place
    plain.load_state_dict(trainer.model.state_dict())

    def loss_and_grads(forward, model):
        model.zero_grad(set_to_none=True)
        loss, nll, n = forward(batch)
        loss.backward()
        return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}

    layers = list(trainer.model.encoder.layers) + list(trainer.model.decoder.layers)
    assert all(compiling.is_compiled(layer) for layer in layers)
    fast = loss_and_grads(lambda b: trainer.objective(b, 0.1, 0), trainer.model)
    eager = loss_and_grads(lambda b: trainer.task.loss_fn(plain, b, 0.1, 0), plain)
    assert_close_to_scale(fast[0], eager[0])
    # inductor's vectorised kernels reorder fp32 sums by host (AVX2, AVX-512, AMX): each
    # gradient is compared to its own scale, not element by element
    for k, g in eager[1].items():
        assert_close_to_scale(fast[1][k], g, rel=1e-4, msg=k)
    # ... yet a real difference fails it: the compiled step with the smoothing term dropped
    broken = loss_and_grads(lambda b: trainer.objective(b, 0.0, 0), trainer.model)
    for k, g in eager[1].items():
        with pytest.raises(AssertionError, match="of the scale"):
            assert_close_to_scale(broken[1][k], g, rel=1e-4, msg=k)


def test_compile_takes_only_a_boolean():
    with pytest.raises(ValueError, match="train.compile must be true or false"):
        load_run_config(None, ["train.compile=1"])


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes(overrides, out, port):
    """Two torchrun agents as two nodes of one process each, meeting through a c10d
    rendezvous on 127.0.0.1 (as on two machines sharing the run directory's disk)."""
    agents = []
    for node in (0, 1):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={node}"]
        cmd += ["--nproc_per_node=1", "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}"]
        cmd += ["--rdzv_id=aiayn-test", "--max_restarts=0"]
        cmd += ["-m", "aiayn.cli", "train", "--out", str(out), "--quiet"]
        for o in overrides:
            cmd += ["--set", o]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        agents.append(
            subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outputs = [a.communicate(timeout=300) for a in agents]
    for agent, (_, err) in zip(agents, outputs, strict=True):
        assert agent.returncode == 0, err[-3000:]
    return outputs


@pytest.mark.slow  # two torchrun agents, two processes, twice (~60 s)
def test_two_nodes_train_from_the_store_resume_and_equal_one_process(sample_corpus, tmp_path):
    common = tiny_run_overrides(sample_corpus) + NO_DROPOUT + ["train.valid_every=3"]
    single = load_run_config(None, common + ["train.accum_steps=2", "train.max_steps=6"])
    Trainer(single, tmp_path / "single", progress=False).fit()

    (tmp_path / "nodes").mkdir()
    shutil.copy(tmp_path / "single" / "tokenizer.model", tmp_path / "nodes")
    two_nodes(common + ["train.max_steps=3"], tmp_path / "nodes", free_port())  # stopped ...
    store = tmp_path / "nodes" / "store"
    written = (store / "train" / "meta.json").stat().st_mtime_ns
    outputs = two_nodes(common + ["train.max_steps=6"], tmp_path / "nodes", free_port())

    a, b = last_weights(tmp_path / "single"), last_weights(tmp_path / "nodes")
    for k in a:
        assert_close_to_scale(b[k], a[k], msg=k)
    summaries = [out for out, _ in outputs if out.strip()]
    assert len(summaries) == 1 and json.loads(summaries[0])["step"] == 6  # global rank 0 only
    records = [json.loads(line) for line in (tmp_path / "nodes" / "metrics.jsonl").open()]
    assert [r["step"] for r in records if r.get("event") == "resume"] == [3]
    # one store per split, written by global rank 0 alone, and reused on resume
    assert sorted(p.name for p in store.iterdir()) == ["train", "valid"]
    assert (store / "train" / "meta.json").stat().st_mtime_ns == written


def test_deterministic_takes_only_a_boolean_and_is_undone_after_the_run(
    sample_corpus, tmp_path, monkeypatch
):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # what the run sets when absent
    with pytest.raises(ValueError, match="train.deterministic must be true or false"):
        load_run_config(None, ["train.deterministic=1"])
    overrides = tiny_run_overrides(sample_corpus, max_steps=1, deterministic="true")
    trainer = Trainer(load_run_config(None, overrides), tmp_path, progress=False)
    assert torch.are_deterministic_algorithms_enabled()
    trainer.fit()
    assert not torch.are_deterministic_algorithms_enabled()  # process-wide: given back
