"""int8 quantization: layers close to float at the scale of their outputs, exact row blocks,
quantized model directories that round-trip, and clear errors."""

import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from aiayn import build_model
from aiayn.infer.greedy import greedy_decode
from aiayn.model.quantize import ONEDNN_FROM, Int8Linear, amx_int8, full_range_int8, quantize_int8
from aiayn.modeldir import load_model_dir, save_model_dir
from tests.tolerance import assert_close_to_scale, max_scaled_diff

# int8 weights (per-row scale) and 8- or 7-bit activations (per-tensor scale) each round to
# within half a step of 1/127 and 1/255 or 1/127 of their range: a product of many such terms
# stays within a few percent of the output's scale, while a wrong scale or a dropped bias
# moves it by far more.
INT8_REL = 0.05


def test_int8_linear_is_close_to_float_and_really_quantized():
    linear = nn.Linear(64, 48)
    q = Int8Linear.from_float(linear)
    x = torch.randn(3, 7, 64)
    got, want = q(x), linear(x)
    assert got.shape == want.shape == (3, 7, 48)
    assert q.weight.dtype == torch.int8 and q.weight.abs().max() == 127
    assert 0 < max_scaled_diff(got, want.detach()) < INT8_REL
    # each row in 127 steps of its largest magnitude: off by at most half a step
    assert_close_to_scale(q.dequantized(), linear.weight.detach(), rel=1 / 254 + 1e-6)


def test_large_products_run_on_onednn_where_the_cpu_has_amx():
    linear = nn.Linear(64, 512)
    q = Int8Linear.from_float(linear)
    engine = torch.backends.quantized.engine
    assert (q._wide is not None) == amx_int8()
    assert torch.backends.quantized.engine == engine  # packing leaves the engine as it was
    if not amx_int8():
        pytest.skip("this CPU has no AMX int8 units: fbgemm alone runs")
    small, large = torch.randn(ONEDNN_FROM // 512 - 1, 64), torch.randn(ONEDNN_FROM // 512, 64)
    linear_dynamic = torch.ops.quantized.linear_dynamic
    assert torch.equal(q(small), linear_dynamic(small, q._packed, q._reduce_range))
    assert torch.equal(q(large), linear_dynamic(large, q._wide, False))
    assert not torch.equal(q(large), linear_dynamic(large, q._packed, q._reduce_range))
    assert 0 < max_scaled_diff(q(large), linear(large).detach()) < INT8_REL
    # a loaded state dict is packed for both engines again
    other = Int8Linear.from_float(nn.Linear(64, 512))
    other.load_state_dict(q.state_dict())
    assert torch.equal(other(large), q(large))


def test_int8_linear_spares_its_packed_weights_the_override_lookup(monkeypatch):
    # torch.ops asks every argument for __torch_function__; asked of the packed weights it
    # fails through a C++ exception, dearer than a decoding step's small product
    q = Int8Linear.from_float(nn.Linear(16, 8))
    x = torch.randn(2, 16)
    asked = []
    lookup = torch._C.ScriptObject.__getattr__

    def spy(self, name):
        asked.append(name)
        return lookup(self, name)

    monkeypatch.setattr(torch._C.ScriptObject, "__getattr__", spy)
    torch.ops.quantized.linear_dynamic(x, q._packed, q._reduce_range)
    assert "__torch_function__" in asked  # the spy sees what a plain call asks
    asked.clear()
    got = q(x)
    assert asked == []
    assert torch.equal(got, torch.ops.quantized.linear_dynamic(x, q._packed, q._reduce_range))

    class Seen(torch.overrides.TorchFunctionMode):  # modes still see the call
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    with Seen() as mode:
        assert torch.equal(q(x), got)
    assert any("linear_dynamic" in name for name in mode.names)


def saturating_product(rows: int = 5, k: int = 64) -> tuple[Int8Linear, torch.Tensor]:
    """An int8 layer and inputs whose 8-bit codes (255) and weights (+-127) overflow any 16-bit
    sum of two products."""
    weight = torch.full((8, k), 127, dtype=torch.int8)
    weight[1::2] = -127
    x = torch.ones(rows, k)
    x[:, 0] = 0.0
    return Int8Linear(weight, torch.full((8,), 0.01), None), x


def test_int8_inputs_never_saturate_the_product():
    # 8-bit inputs only where the CPU's kernel sums in 32 bits; 7 bits elsewhere
    q, x = saturating_product()
    assert_close_to_scale(q(x), x @ q.dequantized().t(), rel=1e-4)
    expected = torch.ops.quantized.linear_dynamic(x, q._packed, not full_range_int8())
    assert torch.equal(q(x), expected)


def test_full_range_is_measured_on_the_running_kernels():
    # fbgemm told to use its AVX2 kernels (16-bit pair sums) must be seen to saturate; its
    # AVX-512 VNNI kernels (32-bit sums), where this CPU has them, must not
    script = (
        "import warnings; warnings.filterwarnings('ignore')\n"
        "from aiayn.model.quantize import full_range_int8\n"
        "print(full_range_int8())"
    )

    def measured(isa: str) -> str:
        env = dict(os.environ, FBGEMM_ENABLE_INSTRUCTIONS=isa)
        run = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        return run.stdout.strip()

    assert measured("AVX2") == "False"
    q, _ = saturating_product()
    assert q._reduce_range == (not full_range_int8())
    if not torch.cpu.get_capabilities().get("avx512_vnni", False):
        pytest.skip("this CPU has no AVX-512 VNNI: 7-bit inputs")
    assert measured("AVX512_E1") == "True"


def test_int8_rows_equal_the_rows_of_the_whole_layer():
    q = Int8Linear.from_float(nn.Linear(32, 96))
    x = torch.randn(5, 32)
    assert_close_to_scale(q.rows(32, 96)(x), q(x)[:, 32:96])
    assert q.rows(32, 96) is q.rows(32, 96)  # built once


@pytest.mark.parametrize("include_output", [True, False])
def test_quantized_encoder_decoder_logits_close_to_float(tiny, include_output):
    model = build_model(tiny).eval()
    src, tgt = torch.randint(5, 64, (2, 7)), torch.randint(5, 64, (2, 5))
    want = model(src, tgt)
    quantize_int8(model, include_output=include_output)
    n_int8 = sum(isinstance(m, Int8Linear) for m in model.modules())
    layers = tiny.n_encoder_layers * 4 + tiny.n_decoder_layers * 6
    assert n_int8 == layers + include_output
    assert isinstance(model.unembed, Int8Linear) == include_output
    assert 0 < max_scaled_diff(model(src, tgt), want) < INT8_REL


def test_quantized_classifier_keeps_its_head_in_float(tiny):
    model = build_model(tiny.replace(family="encoder-only", n_classes=3)).eval()
    tokens = torch.randint(5, 64, (2, 6))
    head = model.classifier[1]
    weight = head.weight.detach().clone()
    pooled_float = model.pool(model.encode(tokens), tokens)
    quantize_int8(model)
    assert model.classifier[1] is head and type(head) is nn.Linear
    assert torch.equal(head.weight, weight)
    # the encoder is int8, close to float at the scale of its features; the head then applies
    # its float weights to those features exactly (three logits alone are too few values to
    # bound int8's rounding by their own scale on every CPU)
    pooled = model.pool(model.encode(tokens), tokens)
    assert 0 < max_scaled_diff(pooled, pooled_float) < INT8_REL
    assert torch.equal(model.classify(tokens), head(pooled))


def test_quantized_model_directory_round_trips(tmp_path, tiny):
    model = build_model(tiny).eval()
    save_model_dir(tmp_path / "float", model)
    quantize_int8(model, include_output=False)
    save_model_dir(tmp_path / "int8", model)
    config = json.loads((tmp_path / "int8" / "config.json").read_text())
    assert config["quantization"] == {"method": "int8", "include_output": False}
    loaded = load_model_dir(tmp_path / "int8")
    assert loaded.quantization == model.quantization
    assert loaded.encoder.layers[0].ffn.linear1.weight.dtype == torch.int8
    src = torch.randint(5, 64, (3, 6))
    assert torch.equal(greedy_decode(loaded, src), greedy_decode(model, src))
    assert_close_to_scale(loaded(src, src[:, :4]), model(src, src[:, :4]))
    # quantizing at load time gives the same model as loading the quantized directory
    at_load = load_model_dir(tmp_path / "float", quantize="int8")
    assert at_load.quantization == {"method": "int8", "include_output": True}
    size = lambda d: (tmp_path / d / "model.safetensors").stat().st_size  # noqa: E731
    assert size("int8") < size("float")


def test_quantize_errors_are_clear(tmp_path, tiny):
    model = build_model(tiny).eval()
    save_model_dir(tmp_path, model)
    with pytest.raises(ValueError, match="allowed: int8"):
        load_model_dir(tmp_path, quantize="int4")
    quantize_int8(model)
    with pytest.raises(ValueError, match="already quantized"):
        quantize_int8(model)
    config = json.loads((tmp_path / "config.json").read_text())
    config["quantization"] = {"method": "int3", "include_output": True}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config.json: quantization.method 'int3'"):
        load_model_dir(tmp_path)


def test_export_refuses_an_int8_directory(tmp_path, tiny):
    from aiayn.interop.hf import export_hf

    model = quantize_int8(build_model(tiny).eval())
    save_model_dir(tmp_path / "int8", model)
    with pytest.raises(ValueError, match="holds int8 weights; export the float"):
        export_hf(tmp_path / "int8", tmp_path / "hf")


def test_a_quantized_directory_is_checked_like_any_other(tmp_path, tiny):
    """The int8 weights carry the SHA-256 and the architecture record float weights do."""
    model = quantize_int8(build_model(tiny).eval())
    save_model_dir(tmp_path, model)
    config = json.loads((tmp_path / "config.json").read_text())
    assert set(config) == {"model", "sha256", "quantization"}
    weights = tmp_path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # the last byte of the last tensor
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="damaged or were replaced"):
        load_model_dir(tmp_path)
    save_model_dir(tmp_path, model)  # whole again
    config = json.loads((tmp_path / "config.json").read_text())
    config["model"]["d_ff"] = 32  # another architecture with the same keys
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="does not describe these weights: d_ff"):
        load_model_dir(tmp_path)
    config["model"]["d_ff"] = tiny.d_ff
    config["quantization"] = {"method": "int8", "include_output": "yes"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="include_output"):
        load_model_dir(tmp_path)


def test_int8_runs_on_the_cpu_only(tmp_path, tiny):
    save_model_dir(tmp_path, build_model(tiny).eval())
    with pytest.raises(ValueError, match="CPU only, not on meta"):
        load_model_dir(tmp_path, device="meta", quantize="int8")
