import pytest
import torch
import torch.nn.functional as F

from aiayn.train.objectives import label_smoothed_nll
from aiayn.train.optim import cosine_lr, noam_lr
from tests.tolerance import assert_close_to_scale, assert_differs_at_scale

PAD = 0


def reference_smoothed_loss(logits, target, eps, pad):
    """The annotated-transformer construction: an explicit target distribution, KL/CE-summed."""
    v = logits.size(-1)
    true = torch.full_like(logits, eps / (v - 2))
    true.scatter_(1, target[:, None], 1.0 - eps)
    true[:, pad] = 0.0
    true[target == pad] = 0.0
    return -(true * F.log_softmax(logits, -1)).sum()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing_matches_explicit_distribution(eps):
    logits = torch.randn(12, 9)
    target = torch.tensor([3, 1, PAD, 5, 8, PAD, 2, 2, 7, 4, 6, PAD])
    loss, nll, n = label_smoothed_nll(logits, target, eps, PAD)
    assert_close_to_scale(loss, reference_smoothed_loss(logits, target, eps, PAD))
    assert_close_to_scale(nll, F.cross_entropy(logits, target, ignore_index=PAD, reduction="sum"))
    assert n == 9


def test_smoothed_loss_gradient_matches_explicit_distribution():
    """Finite logits (the row-sum path) and a row with an impossible id (the masked path)
    both give the gradient of the explicit target distribution."""
    logits = torch.randn(6, 9, dtype=torch.float64)
    target = torch.tensor([3, 1, PAD, 5, 8, 2])
    for blocked in (None, 4):
        ours = logits.clone().requires_grad_(True)
        ref = logits.clone().requires_grad_(True)
        x, r = ours, ref
        if blocked is not None:  # class 4 impossible: it leaves the reference's support too
            keep = [c for c in range(9) if c != blocked]
            x = ours.index_fill(1, torch.tensor([blocked]), float("-inf"))
            r, tgt = ref[:, keep], torch.tensor([keep.index(int(t)) for t in target])
        label_smoothed_nll(x, target, 0.1, PAD)[0].backward()
        reference_smoothed_loss(r, target if blocked is None else tgt, 0.1, PAD).backward()
        assert_close_to_scale(ours.grad, ref.grad)


def test_padding_and_the_pad_class_get_no_mass():
    logits = torch.randn(4, 6, requires_grad=True)
    target = torch.tensor([2, PAD, 3, PAD])
    loss, _, _ = label_smoothed_nll(logits, target, 0.1, PAD)
    loss.backward()
    assert (logits.grad[[1, 3]] == 0).all()  # padded positions contribute nothing
    # torch's built-in smoothing gives mass to the pad class; ours must not:
    builtin = F.cross_entropy(
        logits, target, ignore_index=PAD, label_smoothing=0.1, reduction="sum"
    )
    assert_differs_at_scale(loss, builtin)


def test_ids_the_model_cannot_produce_get_no_smoothing_mass():
    """A logit of -inf (an id missing from an imported vocabulary) is left out of the
    smoothing, as if the class did not exist; the loss and its gradient stay finite."""
    logits = torch.randn(5, 8)
    target = torch.tensor([2, 3, PAD, 7, 5])
    blocked = logits.clone().requires_grad_(True)
    masked = blocked.masked_fill(torch.tensor([False] * 6 + [True, False]), float("-inf"))
    loss, _, n = label_smoothed_nll(masked, target, 0.1, PAD)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(blocked.grad).all() and n == 4
    without = torch.cat([logits[:, :6], logits[:, 7:]], 1)  # class 6 removed: 7 > 6
    expected, _, _ = label_smoothed_nll(without, torch.tensor([2, 3, PAD, 6, 5]), 0.1, PAD)
    assert_close_to_scale(loss, expected)


def test_noam_schedule_follows_the_paper():
    d, w = 512, 4000
    assert_close_to_scale(noam_lr(1, d, w), d**-0.5 * 1 * w**-1.5, rel=1e-12)
    assert_close_to_scale(noam_lr(w, d, w), d**-0.5 * w**-0.5, rel=1e-12)  # the peak
    assert_close_to_scale(noam_lr(4 * w, d, w), noam_lr(w, d, w) / 2, rel=1e-12)
    assert max(range(1, 3 * w, 97), key=lambda s: noam_lr(s, d, w)) in range(w - 97, w + 1)
    assert_close_to_scale(noam_lr(w, d, w, scale=2.0), 2 * noam_lr(w, d, w), rel=1e-12)


def test_cosine_schedule_warms_up_then_decays_to_zero():
    steps = [50, 100, 600, 1100, 5000]  # warming up, the peak, half-way down, the end, after
    got = [cosine_lr(s, 100, 1100, 1e-3) for s in steps]
    assert_close_to_scale(got, [5e-4, 1e-3, 5e-4, 0.0, 0.0], rel=1e-12)
    lrs = [cosine_lr(s, 100, 1100, 1e-3) for s in range(100, 1101)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:], strict=False))


def batch_and_model(family, vocab_size=2000):
    from aiayn import ModelConfig
    from aiayn.data.batching import Batch, TokenBatch
    from aiayn.model import build_model

    config = ModelConfig.preset(
        "tiny", dropout=0.0, embedding_dropout=0.0, family=family, vocab_size=vocab_size
    )
    model = build_model(config)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(5, config.vocab_size, (4, 9), generator=g)
    tokens[1, 6:] = PAD
    if family == "decoder-only":
        return model, TokenBatch(tokens[:, :-1], tokens[:, 1:])
    return model, Batch(tokens, tokens[:, :-1], tokens[:, 1:], list(range(4)))


@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only"])
def test_the_loss_unembedded_in_chunks_equals_the_loss_at_once(monkeypatch, family):
    from aiayn.train import objectives

    model, batch = batch_and_model(family)
    loss_fn = objectives.seq2seq_loss if family == "encoder-decoder" else objectives.causal_lm_loss

    def run():
        model.zero_grad(set_to_none=True)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(
            lambda t: saved.append(t.numel()) or t, lambda t: t
        ):
            loss, nll, n = loss_fn(model, batch, 0.1, PAD)
        loss.backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters()}
        return loss.detach(), nll, n, grads, max(saved)

    whole = run()
    vocab = model.unembed.out_features
    monkeypatch.setattr(objectives, "LOSS_CHUNK_LOGITS", 5 * vocab)  # chunks of 5 rows
    chunked = run()
    assert whole[2] == chunked[2] > 5
    assert_close_to_scale(chunked[0], whole[0])
    assert_close_to_scale(chunked[1], whole[1])
    for k, g in whole[3].items():
        assert_close_to_scale(chunked[3][k], g, msg=k)
    # no tensor of the whole batch's logits is kept for the backward pass, only a chunk's
    assert whole[4] >= whole[2] * vocab and chunked[4] < whole[2] * vocab
    with torch.no_grad():  # evaluation: the same sum, chunked without checkpoints
        assert_close_to_scale(loss_fn(model, batch, 0.0, PAD)[1], whole[1])


@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only"])
def test_activation_checkpointing_gives_the_same_gradients_and_keeps_less(family):
    from aiayn.model.stacks import set_activation_checkpointing
    from aiayn.train import objectives

    model, batch = batch_and_model(family, vocab_size=64)
    model.train()  # dropout on: the recomputed pass must draw the same masks
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.3
    loss_fn = objectives.seq2seq_loss if family == "encoder-decoder" else objectives.causal_lm_loss

    def run():
        model.zero_grad(set_to_none=True)
        saved = []
        torch.manual_seed(5)
        hooks = (lambda t: saved.append(t.numel() * t.element_size()) or t, lambda t: t)
        with torch.autograd.graph.saved_tensors_hooks(*hooks):
            loss, _, _ = loss_fn(model, batch, 0.1, PAD)
        loss.backward()
        return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}, sum(saved)

    plain = run()
    set_activation_checkpointing(model)
    again = run()
    assert_close_to_scale(again[0], plain[0])
    for k, g in plain[1].items():
        assert_close_to_scale(again[1][k], g, msg=k)
    assert again[2] < 0.5 * plain[2]  # the layers' inputs alone are kept
    set_activation_checkpointing(model, False)
    assert run()[2] == plain[2]
