"""Linear weights laid out column-major for decoding (aiayn.model.layout)."""

import copy

import torch

from aiayn import ModelConfig, build_model
from aiayn.model.layout import column_major_weights
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
