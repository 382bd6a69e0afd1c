"""Golden tests: our layers equal PyTorch's reference modules with the same weights."""

import pytest
import torch
from torch import nn

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.layers import DecoderLayer, EncoderLayer
from tests.tolerance import assert_close_to_scale

D, H, FF = 32, 4, 64


def copy_attention(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        ours.in_proj.weight.copy_(ref.in_proj_weight)
        ours.in_proj.bias.copy_(ref.in_proj_bias)
        ours.out_proj.weight.copy_(ref.out_proj.weight)
        ours.out_proj.bias.copy_(ref.out_proj.bias)


def copy_common(ours, ref, norms: int) -> None:
    with torch.no_grad():
        ours.ffn.linear1.load_state_dict(ref.linear1.state_dict())
        ours.ffn.linear2.load_state_dict(ref.linear2.state_dict())
        for i in range(1, norms + 1):
            getattr(ours, f"norm{i}").load_state_dict(getattr(ref, f"norm{i}").state_dict())


def randomize(module: nn.Module) -> None:
    """Non-trivial weights everywhere (LayerNorm gains and biases included)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.3 + (1.0 if p.dim() == 1 and p.size(0) == D else 0.0))


def lengths_to_pad(lengths: list[int], total: int) -> torch.Tensor:
    """True = real token (our convention)."""
    return torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first):
    ref = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    randomize(ref)
    ours = EncoderLayer(D, H, FF, dropout=0.0, norm_first=norm_first)
    copy_attention(ours.self_attn, ref.self_attn)
    copy_common(ours, ref, norms=2)
    ref.eval(), ours.eval()
    x = torch.randn(3, 7, D)
    real = lengths_to_pad([7, 4, 1], 7)
    # torch: key_padding_mask True = ignore; ours: True = attend.
    expected = ref(x, src_key_padding_mask=~real)
    got, _ = ours(x, mask=real[:, None, None, :])
    assert_close_to_scale(got[real], expected[real])


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    ref = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    randomize(ref)
    ours = DecoderLayer(D, H, FF, dropout=0.0, norm_first=norm_first)
    copy_attention(ours.self_attn, ref.self_attn)
    copy_attention(ours.cross_attn, ref.multihead_attn)
    copy_common(ours, ref, norms=3)
    ref.eval(), ours.eval()
    x, memory = torch.randn(3, 6, D), torch.randn(3, 5, D)
    tgt_real, src_real = lengths_to_pad([6, 3, 2], 6), lengths_to_pad([5, 5, 2], 5)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    expected = ref(
        x,
        memory,
        tgt_mask=~causal,
        tgt_key_padding_mask=~tgt_real,
        memory_key_padding_mask=~src_real,
    )
    self_mask = causal[None, None] & tgt_real[:, None, None, :]
    got, _ = ours(x, memory, self_mask, src_real[:, None, None, :])
    assert_close_to_scale(got[tgt_real], expected[tgt_real])


@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_attention_matches_torch(cross):
    ref = nn.MultiheadAttention(D, H, batch_first=True)
    randomize(ref)
    ours = MultiHeadAttention(D, H)
    copy_attention(ours, ref)
    x = torch.randn(2, 5, D)
    memory = torch.randn(2, 8, D) if cross else x
    keys_real = lengths_to_pad([memory.size(1), 3], memory.size(1))
    expected, expected_w = ref(
        x, memory, memory, key_padding_mask=~keys_real, average_attn_weights=False
    )
    mask = keys_real[:, None, None, :]
    got, _ = ours(x, memory if cross else None, mask=mask)
    assert_close_to_scale(got, expected)
    # The explicit path that returns weights agrees with the fused path and with torch.
    got_w_out, got_w = ours(x, memory if cross else None, mask=mask, need_weights=True)
    assert_close_to_scale(got_w_out, expected)
    assert_close_to_scale(got_w, expected_w)
