import json

import pytest
import torch
from safetensors import safe_open

from aiayn import build_model
from aiayn.modeldir import load_model_dir, save_model_dir


@pytest.mark.parametrize("family", ["encoder-decoder", "encoder-only", "decoder-only"])
def test_save_load_gives_identical_outputs(tmp_path, tiny, family):
    model = build_model(tiny.replace(family=family, n_classes=2, pos_encoding="learned")).eval()
    save_model_dir(tmp_path, model)
    loaded = load_model_dir(tmp_path)
    assert loaded.config == model.config
    x = torch.randint(5, 64, (2, 6))
    args = (x, x[:, :4]) if family == "encoder-decoder" else (x,)
    torch.testing.assert_close(loaded(*args), model(*args), atol=0, rtol=0)


def test_a_config_saved_before_the_variant_fields_loads_with_the_paper_values(tmp_path, tiny):
    model = build_model(tiny)
    save_model_dir(tmp_path, model)
    path = tmp_path / "config.json"
    data = json.loads(path.read_text())
    for key in ("embed_scale", "embedding_layer_norm", "n_token_types", "final_logits_bias"):
        del data["model"][key]
    del data["model"]["pooler"]
    path.write_text(json.dumps(data))
    loaded = load_model_dir(tmp_path)
    assert loaded.config == model.config and loaded.config.embed_scale
    assert not loaded.config.final_logits_bias and loaded.config.pooler == "none"


@pytest.mark.parametrize("family", ["encoder-decoder", "encoder-only", "decoder-only"])
def test_variant_fields_save_and_load(tmp_path, tiny, family):
    config = tiny.replace(
        family=family,
        n_classes=2,
        activation="swish",
        embed_scale=False,
        embedding_layer_norm=True,
        n_token_types=2,
        final_logits_bias=True,
        pooler="tanh",
    )
    model = build_model(config).eval()
    with torch.no_grad():
        model.unembed.bias.normal_()
    save_model_dir(tmp_path, model)
    loaded = load_model_dir(tmp_path)
    x = torch.randint(5, 64, (2, 6))
    args = (x, x[:, :4]) if family == "encoder-decoder" else (x,)
    torch.testing.assert_close(loaded(*args), model(*args), atol=0, rtol=0)
    if family == "encoder-only":
        torch.testing.assert_close(loaded.classify(x), model.classify(x), atol=0, rtol=0)


def test_tied_weights_stored_once_and_stay_tied(tmp_path, tiny):
    model = build_model(tiny)
    save_model_dir(tmp_path, model)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        names = list(f.keys())
    assert sum("token.weight" in n or "unembed" in n for n in names) == 1
    loaded = load_model_dir(tmp_path)
    assert loaded.unembed.weight is loaded.src_embed.token.weight


def test_fp16_save_halves_the_file_and_loads_close(tmp_path, tiny):
    model = build_model(tiny).eval()
    save_model_dir(tmp_path / "a", model)
    save_model_dir(tmp_path / "b", model, dtype=torch.float16)
    size = lambda d: (tmp_path / d / "model.safetensors").stat().st_size  # noqa: E731
    assert size("b") < 0.6 * size("a")
    loaded = load_model_dir(tmp_path / "b")
    assert loaded.unembed.weight.dtype == torch.float32
    x = torch.randint(5, 64, (1, 5))
    torch.testing.assert_close(loaded(x, x), model(x, x), atol=2e-2, rtol=2e-2)


def test_missing_files_are_named(tmp_path, tiny):
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_model_dir(tmp_path)
    save_model_dir(tmp_path, build_model(tiny))
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_model_dir(tmp_path)


def test_corrupt_weights_and_config_are_named(tmp_path, tiny):
    save_model_dir(tmp_path, build_model(tiny))
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{garbage")
    with pytest.raises(ValueError, match="model.safetensors: unreadable"):
        load_model_dir(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json: not valid JSON"):
        load_model_dir(tmp_path)


def test_weights_that_do_not_fit_the_config_are_named(tmp_path, tiny):
    save_model_dir(tmp_path, build_model(tiny))
    config = json.loads((tmp_path / "config.json").read_text())
    config["model"]["d_ff"] = 48
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"ffn.linear1.weight has shape \(64, 32\).*\(48, 32\)"):
        load_model_dir(tmp_path)
    config["model"]["d_ff"] = 64
    config["model"]["n_encoder_layers"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="missing .*encoder.layers.2"):
        load_model_dir(tmp_path)
