"""Properties every family must have: causality, padding invariance, batching, gradients."""

import math

import pytest
import torch

from aiayn import build_model
from aiayn.model import masks
from aiayn.model.attention import KVCache
from aiayn.model.layers import SinusoidalPositionalEncoding, TokenEmbedding, sinusoidal_table
from tests.tolerance import assert_close_to_scale, assert_differs_at_scale

PAD = 0


def tokens(b, t, vocab=64, low=5):
    return torch.randint(low, vocab, (b, t))


@pytest.fixture(params=[False, True], ids=["post-LN", "pre-LN"])
def config(request, tiny):
    return tiny.replace(norm_first=request.param)


def test_decoder_is_causal(config):
    model = build_model(config).eval()
    src, tgt = tokens(2, 6), tokens(2, 7)
    base = model(src, tgt)
    for t in range(6):
        changed = tgt.clone()
        changed[:, t + 1] = (changed[:, t + 1] + 1 - 5) % 59 + 5
        out = model(src, changed)
        assert_close_to_scale(out[:, : t + 1], base[:, : t + 1])
        assert_differs_at_scale(out[:, t + 1], base[:, t + 1])


def test_decoder_only_is_causal(config):
    model = build_model(config.replace(family="decoder-only")).eval()
    x = tokens(2, 8)
    base = model(x)
    changed = x.clone()
    changed[:, 5] = (changed[:, 5] - 4) % 59 + 5
    out = model(changed)
    assert_close_to_scale(out[:, :5], base[:, :5])
    assert_differs_at_scale(out[:, 5:], base[:, 5:])


@pytest.mark.parametrize("family", ["encoder-decoder", "encoder-only", "decoder-only"])
def test_padding_invariance(config, family):
    model = build_model(config.replace(family=family, n_classes=3)).eval()
    x = tokens(2, 6)
    padded = torch.cat([x, torch.full((2, 4), PAD)], dim=1)
    if family == "encoder-decoder":
        y = tokens(2, 5)
        y_padded = torch.cat([y, torch.full((2, 3), PAD)], dim=1)
        assert_close_to_scale(model(padded, y_padded)[:, :5], model(x, y))
    elif family == "encoder-only":
        assert_close_to_scale(model(padded)[:, :6], model(x))
        assert_close_to_scale(model.classify(padded), model.classify(x))
    else:
        assert_close_to_scale(model(padded)[:, :6], model(x))


def test_batched_equals_one_by_one(config):
    model = build_model(config).eval()
    srcs = [tokens(1, n)[0] for n in (3, 7, 5)]
    tgts = [tokens(1, n)[0] for n in (4, 2, 6)]
    pad = torch.nn.utils.rnn.pad_sequence
    src = pad(srcs, batch_first=True, padding_value=PAD)
    tgt = pad(tgts, batch_first=True, padding_value=PAD)
    batched = model(src, tgt)
    for i, (s, t) in enumerate(zip(srcs, tgts, strict=False)):
        single = model(s[None], t[None])[0]
        assert_close_to_scale(batched[i, : len(t)], single)


def test_sinusoidal_values_equal_the_formula():
    d = 16
    table = sinusoidal_table(50, d)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            pair = [math.sin(angle), math.cos(angle)]
            assert_close_to_scale(table[pos, 2 * i : 2 * i + 2].double(), pair)
    # Offsets index the same table; positions past max_len extend it.
    pe = SinusoidalPositionalEncoding(d, max_len=4)
    out = pe(torch.zeros(1, 3, d), offset=5)
    assert_close_to_scale(out[0], sinusoidal_table(8, d)[5:8])


@pytest.mark.parametrize("pos_encoding", ["sinusoidal", "learned"])
def test_embeddings_scaled_by_sqrt_d_model(tiny, pos_encoding):
    emb = TokenEmbedding(10, 16)
    x = torch.tensor([[1, 2]])
    assert_close_to_scale(emb(x), emb.weight[x] * 4.0)
    model = build_model(tiny.replace(pos_encoding=pos_encoding)).eval()
    e = model.src_embed
    expected = e.position(e.token.weight[x] * math.sqrt(tiny.d_model))
    assert_close_to_scale(e(x), expected)


@pytest.mark.parametrize("family", ["encoder-decoder", "encoder-only", "decoder-only"])
def test_every_parameter_gets_a_gradient(tiny, family):
    config = tiny.replace(family=family, n_classes=2, pos_encoding="learned", norm_first=True)
    model = build_model(config)
    x = tokens(2, 5)
    if family == "encoder-decoder":
        loss = model(x, tokens(2, 4)).sum()
    elif family == "encoder-only":
        loss = model(x).sum() + model.classify(x).sum()
    else:
        loss = model(x).sum()
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_all_padding_rows_stay_finite(tiny):
    model = build_model(tiny).eval()
    src = torch.tensor([[7, 8, 9], [PAD, PAD, PAD]])
    tgt = torch.tensor([[PAD, 5, 6], [PAD, PAD, PAD]])  # left padding: first row masks all keys
    out = model(src, tgt)
    assert torch.isfinite(out).all()
    record = {}  # the explicit softmax path too, not only the fused kernel
    assert torch.isfinite(model(src, tgt, attention=record)).all()
    assert all(torch.isfinite(w).all() for ws in record.values() for w in ws)
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_masks_are_boolean_true_means_attend():
    x = torch.tensor([[4, 5, PAD]])
    assert masks.padding_mask(x, PAD).tolist() == [[[[True, True, False]]]]
    assert masks.causal_mask(3).dtype == torch.bool
    assert masks.causal_mask(2, offset=1).tolist() == [[[[True, True, False], [True, True, True]]]]
    both = masks.causal_padding_mask(x, PAD)[0, 0]
    assert both.tolist() == [[True, False, False], [True, True, False], [True, True, False]]


@pytest.mark.parametrize("padded", [False, True], ids=["real tokens", "padding inside"])
@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only"])
def test_kv_cached_decoding_equals_full_forward(config, family, padded):
    model = build_model(config.replace(family=family)).eval()
    src, tgt = tokens(2, 5), tokens(2, 7)
    if padded:  # the cache needs no mask until the first padding; then it must mask it
        tgt[1, 4] = tgt[0, 1] = PAD
    if family == "encoder-decoder":
        memory, src_mask = model.encode(src)
        full = model.decode(tgt, memory, src_mask)
        state = model.new_state(src_mask)
        steps = [model.decode(tgt[:, t : t + 1], memory, state=state) for t in range(7)]
    else:
        full = model(tgt)
        state = model.new_state()
        steps = [model(tgt[:, :3], state=state)]  # a prompt, then one token at a time
        steps += [model(tgt[:, t : t + 1], state=state) for t in range(3, 7)]
    assert_close_to_scale(torch.cat(steps, dim=1), full)


@torch.no_grad()
def test_kv_cache_reorder_follows_the_rows_through_appends_and_shrinks():
    # the cache reuses a spare buffer when the batch keeps its size: check it against plain
    # tensors re-indexed the obvious way, across growth, re-orders and a shrink
    cache, k_ref, v_ref = KVCache(), None, None
    for step, index in enumerate([None, [1, 1, 0], [2, 0, 1], None, [0, 0, 0], [2, 1], [1, 1]]):
        if index is not None:
            index = torch.tensor(index)
            cache.reorder(index)
            k_ref, v_ref = k_ref[index], v_ref[index]
        k = torch.randn(k_ref.size(0) if k_ref is not None else 3, 2, 1 + step % 2, 4)
        v = torch.randn_like(k)
        k_ref = k if k_ref is None else torch.cat([k_ref, k], 2)
        v_ref = v if v_ref is None else torch.cat([v_ref, v], 2)
        k_all, v_all = cache.update(k, v)
        assert torch.equal(k_all, k_ref) and torch.equal(v_all, v_ref), step


def test_static_kv_cache_keeps_the_projection_and_reorders_it_whole():
    # cross-attention keeps the projected memory (B, S, 2D) whole: keys and values are views
    # of it, and re-ordering rows selects them from it, as from each one alone
    b, s, h, dh = 3, 5, 2, 4
    kv = torch.randn(b, s, 2 * h * dh)
    cache = KVCache(static=True)
    k, v = cache.keep(kv, h)
    k_ref = kv[..., : h * dh].view(b, s, h, dh).transpose(1, 2)
    v_ref = kv[..., h * dh :].view(b, s, h, dh).transpose(1, 2)
    assert torch.equal(k, k_ref) and torch.equal(v, v_ref) and k.data_ptr() == kv.data_ptr()
    index = torch.tensor([2, 0, 2])
    cache.reorder(index)
    assert torch.equal(cache.k, k_ref[index]) and torch.equal(cache.v, v_ref[index])
    assert cache.memory_kv.shape == (3, s, 2 * h * dh) and cache.length == s
    k2, v2 = torch.randn(3, h, s, dh), torch.randn(3, h, s, dh)
    cache.update(k2, v2)  # given as keys and values: re-ordered as such
    cache.reorder(torch.tensor([1]))
    assert torch.equal(cache.k, k2[[1]]) and torch.equal(cache.v, v2[[1]])


def test_decoding_steps_read_each_cache_in_first_without_changing_outputs(tiny, monkeypatch):
    # every attention over a cache from one query per row reads the cache in first, self-
    # and cross-attention alike (here every cache, however small); the tokens and scores are
    # the same without it
    from aiayn.infer.greedy import greedy_search
    from aiayn.model import attention

    monkeypatch.setattr(attention, "STREAM_IN_FROM", 0)
    model = build_model(tiny).eval()
    src = tokens(4, 6)
    calls = []
    real = KVCache.stream_in

    def spy(cache):
        calls.append(cache.static)
        real(cache)

    monkeypatch.setattr(KVCache, "stream_in", spy)
    out, scores = greedy_search(model, src, max_len=5)
    steps = out.size(1)
    assert calls.count(True) == calls.count(False) == steps * tiny.n_decoder_layers
    monkeypatch.setattr(attention, "STREAM_IN", False)
    calls.clear()
    plain, plain_scores = greedy_search(model, src, max_len=5)
    assert calls == [] and torch.equal(out, plain) and torch.equal(scores, plain_scores)


def test_attention_weights_recorded_without_changing_outputs(tiny):
    model = build_model(tiny).eval()
    src, tgt = tokens(2, 5), tokens(2, 4)
    record = {}
    out = model(src, tgt, attention=record)
    assert_close_to_scale(out, model(src, tgt))
    assert [len(record[k]) for k in ("encoder", "decoder_self", "cross")] == [2, 2, 2]
    assert record["cross"][0].shape == (2, tiny.n_heads, 4, 5)
    assert_close_to_scale(record["cross"][1].sum(-1), torch.ones(2, tiny.n_heads, 4))
    assert (record["decoder_self"][0][0, 0].triu(1) == 0).all()


def test_max_pooling_never_picks_padding(tiny):
    model = build_model(tiny.replace(family="encoder-only", n_classes=2)).eval()
    x = torch.tensor([[5, 6, PAD, PAD]])
    h = model.encode(x)
    h_big_pad = h.clone()
    h_big_pad[:, 2:] = 1e6  # padding states larger than any real one
    assert_close_to_scale(model.pool(h_big_pad, x), h[:, :2].amax(1))
    for pooling, expected in [("mean", h[:, :2].mean(1)), ("first", h[:, 0])]:
        model.config = model.config.replace(pooling=pooling)
        assert_close_to_scale(model.pool(h_big_pad, x), expected)


def test_tied_weights_are_one_tensor(tiny):
    model = build_model(tiny)
    assert model.src_embed.token.weight is model.tgt_embed.token.weight
    assert model.unembed.weight is model.tgt_embed.token.weight
    untied = build_model(tiny.replace(tie_embeddings="none"))
    assert untied.unembed.weight is not untied.tgt_embed.token.weight
    dec = build_model(tiny.replace(tie_embeddings="decoder"))
    assert dec.unembed.weight is dec.tgt_embed.token.weight
    assert dec.src_embed.token.weight is not dec.tgt_embed.token.weight


@pytest.mark.parametrize("family", ["encoder-decoder", "encoder-only", "decoder-only"])
def test_selected_positions_give_the_same_logits(tiny, family):
    model = build_model(tiny.replace(family=family)).eval()
    x = tokens(3, 7)
    select = torch.rand(3, 7) < 0.4
    select[0, 0] = True
    args = (tokens(3, 5), x) if family == "encoder-decoder" else (x,)
    full = model(*args)  # (B, T, V)
    part = model(*args, select=select)  # (n, V)
    assert part.shape == (int(select.sum()), full.size(-1))
    assert_close_to_scale(part, full[select])


@pytest.mark.parametrize("family", ["encoder-decoder", "encoder-only"])
def test_encoder_skipping_padding_equals_the_padded_computation(config, family):
    # in inference the position-wise layers run on the real tokens alone; with gradients on
    # (training) they run on the padded batch: the real positions must agree
    model = build_model(config.replace(family=family)).eval()
    src = tokens(3, 8)
    src[0, 5:] = PAD
    src[2, 2:] = PAD
    real = src != PAD
    with torch.no_grad():
        packed = model.encode(src)
        packed = packed[0] if family == "encoder-decoder" else packed
    padded = model.encode(src)
    padded = (padded[0] if family == "encoder-decoder" else padded).detach()
    assert_close_to_scale(packed[real], padded[real])
    assert (packed[~real] == 0).all() and not (padded[~real] == 0).all()


def test_attention_runs_in_float32_under_cpu_autocast(tiny, monkeypatch):
    """bf16 autocast on the CPU: the projections are bf16, attention itself float32 (autocast
    off inside), and the gradients reach the float32 weights; without autocast, float32 as is."""
    import torch.nn.functional as F

    seen = []
    sdpa = F.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        seen.append((q.dtype, k.dtype, v.dtype, torch.is_autocast_enabled("cpu")))
        return sdpa(q, k, v, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    model = build_model(tiny).train()
    src, tgt = torch.randint(5, 64, (2, 7)), torch.randint(5, 64, (2, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, tgt)
    assert logits.dtype == torch.bfloat16  # the products did run in bf16
    layers = tiny.n_encoder_layers + 2 * tiny.n_decoder_layers
    assert seen == [(torch.float32,) * 3 + (False,)] * layers
    logits.float().sum().backward()
    grad = model.encoder.layers[0].self_attn.in_proj.weight.grad
    assert grad.dtype == torch.float32 and torch.isfinite(grad).all() and grad.abs().sum() > 0
    seen.clear()
    model(src, tgt)
    assert seen == [(torch.float32,) * 3 + (False,)] * layers


@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only"])
def test_kernel_causal_mask_equals_the_tensor_mask_at_real_positions(config, family):
    """``padded_right`` (training batches) leaves the causal mask to the attention kernel
    (``masks.CAUSAL``): the same states at every real position, and the same gradients of a
    loss over them, as the explicit causal-and-padding mask."""
    model = build_model(config.replace(family=family)).train()
    y = tokens(3, 7)
    y[0, 4:], y[1, 6:] = PAD, PAD  # padded at the end, as batches are
    keep = y != PAD
    args = (tokens(3, 5), y) if family == "encoder-decoder" else (y,)
    outputs, grads = [], []
    for padded_right in (False, True):
        model.zero_grad()
        states = model(*args, select=keep, logits=False, padded_right=padded_right)  # (n, D)
        (states * torch.linspace(-1, 1, states.size(-1))).sum().backward()
        outputs.append(states.detach())
        grads.append([p.grad.clone() for p in model.parameters()])
    assert_close_to_scale(outputs[1], outputs[0])
    for got, expected in zip(grads[1], grads[0], strict=True):
        assert_close_to_scale(got, expected)


def test_kernel_causal_mask_gives_the_weights_of_the_tensor_mask(tiny):
    """With attention weights asked for, ``CAUSAL`` becomes the explicit causal mask."""
    model = build_model(tiny).eval()
    src, tgt = tokens(2, 5), tokens(2, 6)
    memory, src_mask = model.encode(src)
    records = [{}, {}]
    for record, padded_right in zip(records, (False, True), strict=True):
        model.decode(tgt, memory, src_mask, attention=record, padded_right=padded_right)
    for got, expected in zip(records[1]["decoder_self"], records[0]["decoder_self"], strict=True):
        assert_close_to_scale(got, expected)
        assert (got[..., 0, 1:] == 0).all()  # the first query sees only itself


def test_causal_is_refused_where_it_means_nothing(tiny):
    attn = build_model(tiny).decoder.layers[0].cross_attn
    x = torch.randn(1, 3, tiny.d_model)
    with pytest.raises(ValueError, match="CAUSAL"):
        attn(x, x, mask=masks.CAUSAL)
