"""Linear weights laid out column-major for decoding (aiayn.model.layout)."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from aiayn import ModelConfig, build_model
from aiayn.model import layout
from aiayn.model.attention import linear_rows
from aiayn.model.layout import (
    ENGINE_VARIABLE,
    ONEDNN_ROWS,
    PackedLinear,
    column_major_weights,
    onednn_fp32,
    pack_linears,
)
from aiayn.model.quantize import quantize_int8
from aiayn.modeldir import WEIGHTS_FILE, load_model_dir, save_model_dir
from tests.tolerance import assert_close_to_scale


def _model(**fields):
    torch.manual_seed(0)
    return build_model(ModelConfig.preset("tiny", vocab_size=50, **fields)).eval()


def test_values_shapes_and_ties_stay_only_the_strides_change():
    model = _model()
    before = {name: t.clone() for name, t in model.state_dict().items()}
    n = column_major_weights(model)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert n == len({id(m.weight) for m in linears}) > 0
    for m in linears:
        assert m.weight.stride() == (1, m.weight.size(0))  # the transpose of a contiguous tensor
    for name, t in model.state_dict().items():
        assert torch.equal(t, before[name]), name
    assert model.unembed.weight is model.tgt_embed.token.weight  # the tie survives (§3.4)
    assert column_major_weights(model) == n  # again: the same weights, already laid out
    assert all(m.weight.stride() == (1, m.weight.size(0)) for m in linears)


def test_outputs_equal_the_row_major_model_up_to_rounding():
    model = _model()
    laid = copy.deepcopy(model)
    column_major_weights(laid)
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    with torch.no_grad():
        assert_close_to_scale(laid(src, tgt), model(src, tgt))


def test_a_loaded_model_is_laid_out_and_saves_the_same_bytes(tmp_path):
    model = _model()
    save_model_dir(tmp_path / "a", model)
    loaded = load_model_dir(tmp_path / "a")
    assert loaded.unembed.weight.stride() == (1, loaded.unembed.weight.size(0))
    save_model_dir(tmp_path / "b", loaded)  # non-contiguous weights are written contiguous
    a, b = ((tmp_path / d / WEIGHTS_FILE).read_bytes() for d in "ab")
    assert a == b


def test_int8_layers_quantize_a_laid_out_model_as_a_row_major_one():
    row, col = _model(), _model()
    column_major_weights(col)
    quantize_int8(row)
    quantize_int8(col)
    src, tgt = torch.randint(4, 50, (2, 6)), torch.randint(4, 50, (2, 4))
    with torch.no_grad():
        assert torch.equal(col(src, tgt), row(src, tgt))
    # the embedding the quantized output projection was tied to is read by rows again
    assert col.src_embed.token.weight.is_contiguous()
    assert col.tgt_embed.token.weight is col.src_embed.token.weight


def _packed(model):
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    column_major_weights(model)
    return pack_linears(model)


def test_packed_linears_keep_parameters_ties_and_state_and_match_mkl(monkeypatch):
    monkeypatch.setattr(layout, "ONEDNN_MACS", 0)  # this tiny model's products on oneDNN too
    model, reference = _model(), _model()
    before = {name: t.clone() for name, t in model.state_dict().items()}
    n = _packed(model)
    assert n == sum(isinstance(m, torch.nn.Linear) for m in reference.modules()) > 0
    assert all(isinstance(m, PackedLinear) for m in model.modules() if isinstance(m, nn.Linear))
    assert model.unembed.weight is model.tgt_embed.token.weight  # the tie survives (§3.4)
    assert set(model.state_dict()) == set(before)
    for name, t in model.state_dict().items():
        assert torch.equal(t, before[name]), name
    for rows in (1, 3, ONEDNN_ROWS, 64):  # both sides of the threshold
        src, tgt = torch.randint(4, 50, (rows, 7)), torch.randint(4, 50, (rows, 5))
        with torch.no_grad():
            assert_close_to_scale(model(src, tgt), reference(src, tgt))


def test_a_packed_linear_takes_onednn_from_its_threshold_and_mkl_below(monkeypatch):
    linear = torch.nn.Linear(16, 24)
    pack_linears(torch.nn.Sequential(linear))
    monkeypatch.setattr(layout, "ONEDNN_MACS", ONEDNN_ROWS * 16 * 24)
    calls = []
    real = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(
        torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(1) or real(*a)
    )
    with torch.no_grad():
        for rows, used in ((ONEDNN_ROWS - 1, 0), (ONEDNN_ROWS, 1), (2 * ONEDNN_ROWS, 2)):
            x = torch.randn(rows, 16)
            assert_close_to_scale(linear(x), F.linear(x, linear.weight, linear.bias))
            assert len(calls) == used, rows
        x = torch.randn(2, 5, 16)  # (B, T, K): rows counted over both
        assert_close_to_scale(linear(x), F.linear(x, linear.weight, linear.bias))
        assert len(calls) == 3
        monkeypatch.setattr(layout, "ONEDNN_MACS", 10 * 16 * 24 + 1)  # a product too small
        linear(x)
        assert len(calls) == 3


def test_a_packed_linear_follows_its_weight_and_trains_through_f_linear(monkeypatch):
    monkeypatch.setattr(layout, "ONEDNN_MACS", 0)
    linear = torch.nn.Linear(8, 8)
    pack_linears(torch.nn.Sequential(linear))
    x = torch.randn(ONEDNN_ROWS * 2, 8)
    with torch.no_grad():
        first = linear(x)
        linear.weight.mul_(2.0)  # changed in place: the packed copy is rebuilt
        assert_close_to_scale(linear(x), F.linear(x, linear.weight, linear.bias))
        assert_close_to_scale(linear(x), 2 * (first - linear.bias) + linear.bias)
    loss = linear(x).square().sum()  # with gradients: F.linear, differentiable
    loss.backward()
    assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0


def test_packed_rows_keep_gradients_flowing_to_the_fused_weight(monkeypatch):
    monkeypatch.setattr(layout, "ONEDNN_MACS", 0)
    linear, plain = torch.nn.Linear(8, 24), torch.nn.Linear(8, 24)
    plain.load_state_dict(linear.state_dict())
    pack_linears(torch.nn.Sequential(linear))
    x = torch.randn(2, 6, 8)
    linear_rows(linear, x, 8, 24).square().sum().backward()
    linear_rows(plain, x, 8, 24).square().sum().backward()
    assert_close_to_scale(linear.weight.grad, plain.weight.grad)
    assert linear.weight.grad[8:].abs().sum() > 0


def test_packed_rows_equal_the_rows_of_the_product(monkeypatch):
    monkeypatch.setattr(layout, "ONEDNN_MACS", 0)
    linear = torch.nn.Linear(8, 24)
    pack_linears(torch.nn.Sequential(linear))
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        whole = F.linear(x, linear.weight, linear.bias)
        assert_close_to_scale(linear_rows(linear, x, 8, 24), whole[..., 8:24])
        assert_close_to_scale(linear_rows(linear, x, 0, 8), whole[..., :8])


def test_a_packed_model_copies_and_saves_as_before(tmp_path, monkeypatch):
    monkeypatch.setattr(layout, "ONEDNN_MACS", 0)
    model = _model()
    save_model_dir(tmp_path / "a", model)
    _packed(model)
    with torch.no_grad():
        model(torch.randint(4, 50, (8, 5)), torch.randint(4, 50, (8, 4)))  # packs
    twin = copy.deepcopy(model)
    src, tgt = torch.randint(4, 50, (8, 5)), torch.randint(4, 50, (8, 4))
    with torch.no_grad():
        assert torch.equal(twin(src, tgt), model(src, tgt))
    save_model_dir(tmp_path / "b", model)
    a, b = ((tmp_path / d / WEIGHTS_FILE).read_bytes() for d in "ab")
    assert a == b


def test_the_engine_is_chosen_by_the_cpu_unless_the_variable_says(monkeypatch):
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    monkeypatch.setenv(ENGINE_VARIABLE, "mkl")
    assert onednn_fp32() is False
    monkeypatch.setenv(ENGINE_VARIABLE, "onednn")
    assert onednn_fp32() is True
    monkeypatch.setenv(ENGINE_VARIABLE, "auto")
    vendor, flags = layout._cpu_vendor_flags()
    assert onednn_fp32() is (vendor == "AuthenticAMD" and "avx512f" in flags)
    monkeypatch.setattr(layout, "_cpu_vendor_flags", lambda: ("GenuineIntel", {"avx512f"}))
    assert onednn_fp32() is False
    monkeypatch.setattr(layout, "_cpu_vendor_flags", lambda: ("AuthenticAMD", {"avx2"}))
    assert onednn_fp32() is False
    monkeypatch.setenv(ENGINE_VARIABLE, "blas")
    with pytest.raises(ValueError, match="AIAYN_FP32_ENGINE='blas': choose auto, mkl or onednn"):
        onednn_fp32()
