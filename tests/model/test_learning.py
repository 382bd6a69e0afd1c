"""Each family fits a small synthetic task to near-zero loss in seconds."""

import torch
import torch.nn.functional as F

from aiayn import build_model

PAD, BOS = 0, 1


def fit(model, batch_fn, loss_fn, steps, lr=3e-3):
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    # short warmup, then linear decay: robust to seeds and thread counts
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / 50) * (1 - i / steps) + 0.01
    )
    model.train()
    for _ in range(steps):
        loss = loss_fn(model, *batch_fn())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    with torch.no_grad():
        return loss_fn(model, *batch_fn()).item()


def test_encoder_decoder_learns_to_reverse(tiny):
    model = build_model(tiny)

    def batch():
        src = torch.randint(3, 16, (64, 6))
        tgt = src.flip(1)
        tgt_in = torch.cat([torch.full((64, 1), BOS), tgt[:, :-1]], 1)
        return src, tgt_in, tgt

    def loss(model, src, tgt_in, tgt):
        return F.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt.flatten())

    assert fit(model, batch, loss, steps=300) < 0.1  # chance: ln(13) = 2.6


def test_decoder_only_learns_a_repeated_string(tiny):
    model = build_model(tiny.replace(family="decoder-only"))
    text = torch.tensor([5, 9, 12, 7, 30, 8, 21] * 6)

    def batch():
        starts = torch.randint(0, 7, (16,))
        x = torch.stack([text[s : s + 33] for s in starts])
        return x[:, :-1], x[:, 1:]

    def loss(model, x, y):
        return F.cross_entropy(model(x)[:, 7:].flatten(0, 1), y[:, 7:].flatten())

    assert fit(model, batch, loss, steps=200) < 0.05  # chance: ln(7) = 1.9 at best


def test_encoder_only_learns_token_presence(tiny):
    model = build_model(tiny.replace(family="encoder-only", n_classes=2))

    def batch():
        x = torch.randint(5, 40, (64, 10))
        x[::2, 3] = 7  # half the batch surely contains the token
        x[torch.rand(64, 10) < 0.2] = PAD  # and some padding, which must be ignored
        label = (x == 7).any(1).long()
        return x, label

    def loss(model, x, label):
        return F.cross_entropy(model.classify(x), label)

    assert fit(model, batch, loss, steps=250) < 0.05
