"""Training on a CUDA device: the same step as the CPU's, bf16, exact resume, NCCL.

Every test here needs a GPU and is skipped cleanly without one (the ``gpu`` marker selects
them: ``pytest -m gpu``).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from aiayn.config import ModelConfig, load_run_config
from aiayn.data.tokenizer import PAD
from aiayn.model import build_model
from aiayn.train import checkpoint as ckpt
from aiayn.train import compiling, objectives
from aiayn.train.loop import Trainer
from aiayn.train.optim import fused_adam, parameter_groups
from tests.conftest import REPO_ROOT, tiny_run_overrides
from tests.tolerance import assert_close_to_scale

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
NO_DROPOUT = ["model.dropout=0.0", "model.attention_dropout=0.0", "model.embedding_dropout=0.0"]


def final_weights(run_dir):
    return ckpt.load_checkpoint(ckpt.list_checkpoints(run_dir / "checkpoints")[-1])["model"]


def test_a_training_step_on_cuda_equals_the_cpus_in_float32(sample_corpus, tmp_path):
    overrides = tiny_run_overrides(sample_corpus, max_steps=1) + NO_DROPOUT
    run = load_run_config(None, overrides + ['train.device="cpu"', 'train.precision="fp32"'])
    trainer = Trainer(run, tmp_path / "run", progress=False)
    trainer.close()
    batch = trainer.task.train_batches(0)[0]
    cpu_model = trainer.model
    gpu_model = build_model(cpu_model.config).cuda()
    gpu_model.load_state_dict(cpu_model.state_dict())
    torch.backends.cuda.matmul.allow_tf32 = False  # plain float32 products, as on the CPU
    try:
        results = []
        for model, device in ((cpu_model, "cpu"), (gpu_model, "cuda")):
            model.zero_grad(set_to_none=True)
            loss, _, _ = trainer.task.loss_fn(model, batch.to(torch.device(device)), 0.1, PAD)
            loss.backward()
            grads = {k: p.grad.cpu() for k, p in model.named_parameters()}
            results.append((loss.detach().cpu(), grads))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = True
    (cpu_loss, cpu_grads), (gpu_loss, gpu_grads) = results
    assert_close_to_scale(gpu_loss, cpu_loss)
    for k, g in cpu_grads.items():
        assert_close_to_scale(gpu_grads[k], g, rel=1e-4, msg=k)


def test_bf16_autocast_trains_on_cuda(sample_corpus, tmp_path):
    overrides = tiny_run_overrides(sample_corpus, max_steps=30, lr_scale=4.0) + [
        'train.device="cuda"',
        'train.precision="bf16"',
    ]
    summary = Trainer(load_run_config(None, overrides), tmp_path, progress=False).fit()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert losses[-1] < losses[0] - 0.5  # it learns
    assert summary["valid_loss"] < 10
    precision = [r for r in records if r.get("event") == "precision"]
    assert precision[0]["precision"] == "bf16"


@pytest.mark.parametrize("deterministic", ["false", "true"])
def test_a_resume_on_the_gpu_replays_exactly(sample_corpus, tmp_path, monkeypatch, deterministic):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    common = tiny_run_overrides(sample_corpus) + [
        "model.dropout=0.2",
        'train.device="cuda"',
        'train.precision="fp32"',
        f"train.deterministic={deterministic}",
    ]
    Trainer(load_run_config(None, common + ["train.max_steps=10"]), tmp_path / "full",
            progress=False).fit()  # fmt: skip
    Trainer(load_run_config(None, common + ["train.max_steps=5"]), tmp_path / "split",
            progress=False).fit()  # fmt: skip
    again = Trainer(load_run_config(None, common + ["train.max_steps=10"]), tmp_path / "split",
                    progress=False)  # fmt: skip
    assert again.step == 5
    again.fit()
    a, b = final_weights(tmp_path / "full"), final_weights(tmp_path / "split")
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_the_optimizer_is_fused_on_cuda_only():
    model = build_model(ModelConfig.preset("tiny"))
    assert fused_adam(parameter_groups(model, 0.0)) is None
    assert fused_adam(parameter_groups(model.cuda(), 0.0)) is True


def test_a_25k_token_batch_is_unembedded_in_one_piece():
    unembed = torch.nn.Linear(512, 37000, bias=False).cuda()
    states = torch.zeros(2, 512, device="cuda")
    free, total = torch.cuda.mem_get_info()
    if free < 32e9:
        pytest.skip(f"{free / 1e9:.0f} GB free: a 25k x 37k batch's logits need a larger GPU")
    assert objectives.loss_chunk_rows(unembed, states) >= 25_000
    assert objectives.loss_chunk_rows(unembed.cpu(), states.cpu()) < 1_000  # the CPU's bound


def test_one_process_nccl_ddp_starts_and_trains(tmp_path):
    script = textwrap.dedent(
        """
        import torch, torch.distributed as dist
        from aiayn.config import ModelConfig
        from aiayn.model import build_model
        from aiayn.train.distributed import Objective
        from aiayn.train.objectives import causal_lm_loss
        from aiayn.data.batching import TokenBatch

        dist.init_process_group("nccl", rank=0, world_size=1)
        config = ModelConfig.preset("tiny", family="decoder-only", vocab_size=50)
        model = build_model(config).cuda()
        ddp = torch.nn.parallel.DistributedDataParallel(
            Objective(model, causal_lm_loss), device_ids=[0]
        )
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True)
        tokens = torch.randint(4, 50, (8, 12), device="cuda")
        batch = TokenBatch(tokens[:, :-1], tokens[:, 1:])
        losses = []
        for _ in range(20):
            loss, _, n = ddp(batch, 0.0, 0)
            (loss / n).backward()
            opt.step()
            opt.zero_grad()
            losses.append(float(loss / n))
        dist.destroy_process_group()
        assert losses[-1] < losses[0] - 0.5, losses
        print("trained", losses[0], losses[-1])
        """
    )
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533",
           "PYTHONPATH": str(REPO_ROOT / "src")}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trained" in done.stdout


@pytest.mark.slow  # compiles two layers and the loss (~1 min)
def test_a_compiled_step_on_cuda_equals_eager(sample_corpus, tmp_path):
    overrides = tiny_run_overrides(sample_corpus, max_steps=1, compile="true") + NO_DROPOUT
    overrides += ['train.device="cuda"', 'train.precision="fp32"']
    trainer = Trainer(load_run_config(None, overrides), tmp_path, progress=False)
    trainer.close()
    batch = trainer.task.train_batches(0)[0].to(torch.device("cuda"))
    plain = build_model(trainer.model.config).cuda()  # the layers compile in place
    plain.load_state_dict(trainer.model.state_dict())
    layers = list(trainer.model.encoder.layers) + list(trainer.model.decoder.layers)
    assert all(compiling.is_compiled(layer) for layer in layers)
    fast = trainer.objective(batch, 0.1, PAD)[0]
    eager = objectives.seq2seq_loss(plain, batch, 0.1, PAD)[0]
    assert_close_to_scale(fast.detach(), eager.detach(), rel=1e-4)


@pytest.mark.parametrize("kind", ["padding mask", "causal"])
def test_half_precision_attention_on_its_chosen_kernels_equals_the_written_out_formula(kind):
    """bf16 attention on ``CUDA_HALF_BACKENDS`` (not cuDNN's kernel) against eq. 1 in float32,
    forward and gradients, within bf16's rounding."""
    from aiayn.model import attention as attn
    from aiayn.model.masks import causal_mask

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(6, 8, 23, 64, device="cuda", generator=g) for _ in range(3))
    if kind == "causal":
        mask, causal = None, True
        reference_mask = causal_mask(23, q.device)
    else:
        lengths = torch.tensor([23, 20, 5, 23, 1, 17], device="cuda")
        mask = (torch.arange(23, device="cuda")[None, :] < lengths[:, None])[:, None, None, :]
        causal, reference_mask = False, mask
    half = [x.bfloat16().requires_grad_() for x in (q, k, v)]
    full = [x.clone().requires_grad_() for x in (q, k, v)]
    out = attn.fused_attention(*half, mask, 0.0, causal)
    expected, _ = attn.attention(*full, reference_mask)
    grad = torch.randn(expected.shape, device="cuda", generator=g)
    out.backward(grad.bfloat16())
    expected.backward(grad)
    assert_close_to_scale(out.float(), expected.detach(), rel=2e-2)
    for got, want in zip(half, full, strict=True):
        assert_close_to_scale(got.grad.float(), want.grad, rel=3e-2)
