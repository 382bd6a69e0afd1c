"""The optimizer and the learning-rate schedules against torch's and transformers' own."""

import pytest
import torch

from aiayn import ModelConfig, build_model
from aiayn.config import TrainConfig
from aiayn.train.optim import build_optimizer, linear_lr, parameter_groups
from tests.tolerance import assert_close_to_scale


def lrs(scheduler, n: int) -> list[float]:
    """The learning rate of optimizer steps 1..n."""
    out = []
    for _ in range(n):
        out.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    return out


def dummy_optimizer(lr: float = 1.0):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


@pytest.mark.parametrize("warmup, total", [(1, 10), (10, 100), (37, 250)])
def test_linear_schedule_matches_torch_and_transformers(warmup, total):
    from transformers import get_linear_schedule_with_warmup

    peak = 3e-4
    config = TrainConfig(schedule="linear", lr_scale=peak, warmup=warmup)
    _, ours = build_optimizer(torch.nn.Linear(2, 2), config, d_model=16, total_steps=total)
    got = lrs(ours, total + 5)

    # torch: a linear warmup from peak / warmup to peak, then a linear decay to zero
    opt = dummy_optimizer(peak)
    parts = [
        torch.optim.lr_scheduler.LinearLR(opt, 1 / warmup, 1.0, total_iters=warmup - 1),
        torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.0, total_iters=total - warmup),
    ]
    torch_lrs = lrs(torch.optim.lr_scheduler.SequentialLR(opt, parts, [warmup - 1]), total + 5)
    assert_close_to_scale(got, torch_lrs, rel=1e-9)

    # transformers gives its first step lr 0; ours starts one step further along
    opt = dummy_optimizer(peak)
    hf = lrs(get_linear_schedule_with_warmup(opt, warmup, total), total + 6)
    assert_close_to_scale(got, hf[1:], rel=1e-9)

    assert_close_to_scale([max(got), got[warmup - 1]], [peak, peak], rel=1e-12)
    assert got[total - 1] == 0.0 and got[-1] == 0.0  # zero at the last step and after


def test_linear_schedule_hand_values():
    got = [linear_lr(s, 10, 110, 1e-3) for s in (5, 10, 60)]  # warming up, peak, half-way down
    assert_close_to_scale(got, [5e-4, 1e-3, 5e-4], rel=1e-12)
    assert linear_lr(110, 10, 110, 1e-3) == 0.0
    assert linear_lr(500, 10, 110, 1e-3) == 0.0


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_decaying_schedules_need_the_run_length(schedule):
    config = TrainConfig(schedule=schedule)  # valid: the loop supplies the length
    with pytest.raises(ValueError, match=f"train.schedule={schedule}"):
        build_optimizer(torch.nn.Linear(2, 2), config, d_model=16)


def tiny_encoder():
    config = ModelConfig.preset("tiny", family="encoder-only", n_classes=2, dropout=0.0)
    return build_model(config.replace(embedding_dropout=0.0, n_decoder_layers=0))


def test_weight_decay_skips_biases_and_layer_norms():
    model = tiny_encoder()
    decay, no_decay = parameter_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(names[id(p)].endswith("weight") for p in decay["params"])
    assert any("embed" in names[id(p)] for p in decay["params"])  # embeddings decay
    assert {names[id(p)].rsplit(".", 1)[-1] for p in no_decay["params"]} == {"weight", "bias"}
    assert all(p.dim() == 1 for p in no_decay["params"])  # LayerNorm gains and all biases
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))

    # with zero gradients Adam moves nothing: only the decay acts, on the matrices alone
    config = TrainConfig(schedule="constant", warmup=1, lr_scale=0.01, weight_decay=0.1)
    optimizer, _ = build_optimizer(model, config, d_model=32)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for n, p in model.named_parameters():
        shrink = 1 - 0.01 * 0.1 if p.dim() >= 2 else 1.0
        torch.testing.assert_close(p.detach(), before[n] * shrink, rtol=0, atol=0)


def train_steps(model, optimizer, scheduler, steps: int = 4) -> None:
    g = torch.Generator().manual_seed(3)
    for _ in range(steps):
        tokens = torch.randint(5, 64, (4, 9), generator=g)  # (B, T)
        labels = torch.randint(0, 2, (4,), generator=g)
        torch.nn.functional.cross_entropy(model.classify(tokens), labels).backward()
        optimizer.step()
        optimizer.zero_grad()
        if scheduler is not None:
            scheduler.step()


@pytest.mark.parametrize("weight_decay", [0.0, 0.01, 0.3])
def test_weight_decay_matches_torch_adamw(weight_decay):
    ours = tiny_encoder()
    theirs = tiny_encoder()
    theirs.load_state_dict(ours.state_dict())
    start = ours.classifier[1].weight.detach().clone()
    config = TrainConfig(
        schedule="linear", warmup=2, lr_scale=1e-3, weight_decay=weight_decay, beta2=0.999
    )
    optimizer, scheduler = build_optimizer(ours, config, d_model=32, total_steps=6)
    train_steps(ours, optimizer, scheduler)

    # the recipe of Hugging Face's Trainer: no decay for biases and LayerNorm weights
    named = dict(theirs.named_parameters())
    skip = [n for n in named if n.endswith("bias") or "norm" in n]
    groups = [
        {"params": [named[n] for n in named if n not in skip], "weight_decay": weight_decay},
        {"params": [named[n] for n in skip], "weight_decay": 0.0},
    ]
    reference = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-9)
    from transformers import get_linear_schedule_with_warmup

    hf = get_linear_schedule_with_warmup(reference, 2, 6)
    reference.step()  # transformers' first step has lr 0: ours is its second
    hf.step()
    train_steps(theirs, reference, hf)
    for n, p in ours.named_parameters():
        assert_close_to_scale(p, named[n], msg=n)
    assert not torch.equal(ours.classifier[1].weight, start)  # it trained


def test_without_weight_decay_the_optimizer_is_the_papers_adam():
    ours, theirs = tiny_encoder(), tiny_encoder()
    theirs.load_state_dict(ours.state_dict())
    config = TrainConfig(schedule="constant", warmup=1, lr_scale=1e-3)
    optimizer, scheduler = build_optimizer(ours, config, d_model=32)
    train_steps(ours, optimizer, scheduler)
    adam = torch.optim.Adam(theirs.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    train_steps(theirs, adam, None)
    for (n, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        assert_close_to_scale(p, q, msg=n)


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_a_time_budget_decays_to_zero_where_the_time_runs_out(schedule):
    """With max_minutes, a run whose steps take 1 s each on a 100 s budget decays to 0 at
    step 100, whatever its step limit; at 4 s a step, at step 25: the same schedule as a run
    told its steps, on the host's own number of them."""
    warmup = 5
    config = TrainConfig(schedule=schedule, lr_scale=1e-3, warmup=warmup, max_minutes=100 / 60)
    for seconds, end in [(1.0, 100), (4.0, 25)]:
        spent = {"s": 0.0}
        _, timed = build_optimizer(
            torch.nn.Linear(2, 2),
            config,
            16,
            total_steps=10_000,
            spent_s=lambda spent=spent: spent["s"],
        )
        got = []
        for _ in range(end + 3):
            got.append(timed.get_last_lr()[0])
            timed.optimizer.step()
            timed.step()  # inside the step, as the loop does
            spent["s"] += seconds  # then the step's time, as the loop counts it
        told = TrainConfig(schedule=schedule, lr_scale=1e-3, warmup=warmup)
        _, by_steps = build_optimizer(torch.nn.Linear(2, 2), told, 16, total_steps=end)
        assert_close_to_scale(got, lrs(by_steps, end + 3), rel=1e-9)
        assert got[end - 1] == 0.0 and got[-1] == 0.0


def test_a_time_budget_never_ends_the_decay_after_the_step_limit():
    """The step limit still ends the decay when it comes before the time does."""
    config = TrainConfig(schedule="linear", lr_scale=1e-3, warmup=2, max_minutes=60.0)
    spent = {"s": 0.0}
    _, timed = build_optimizer(
        torch.nn.Linear(2, 2), config, 16, total_steps=20, spent_s=lambda: spent["s"]
    )
    got = []
    for _ in range(22):
        got.append(timed.get_last_lr()[0])
        timed.optimizer.step()
        timed.step()
        spent["s"] += 1.0
    _, by_steps = build_optimizer(torch.nn.Linear(2, 2), config, 16, total_steps=20)
    assert_close_to_scale(got, lrs(by_steps, 22), rel=1e-12)
