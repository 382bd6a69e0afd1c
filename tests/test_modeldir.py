import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from aiayn import ModelConfig, build_model
from aiayn.errors import UserError
from aiayn.model.layout import column_major_weights
from aiayn.modeldir import load_model_dir, save_model_dir
from tests.tolerance import assert_close_to_scale


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
    for name, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], t), name
    column_major_weights(model)  # as loaded on a CPU: then the same products, bit for bit
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
    assert_close_to_scale(loaded(x, x), model(x, x), rel=5e-3)  # float16: 11 bits


def test_missing_files_are_named(tmp_path, tiny):
    with pytest.raises(UserError, match="config.json"):
        load_model_dir(tmp_path)
    save_model_dir(tmp_path, build_model(tiny))
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(UserError, match="model.safetensors"):
        load_model_dir(tmp_path)


def _edit_config(directory, edit):
    config = json.loads((directory / "config.json").read_text())
    edit(config)
    (directory / "config.json").write_text(json.dumps(config))


def test_corrupt_weights_and_config_are_named(tmp_path, tiny):
    save_model_dir(tmp_path, build_model(tiny))
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{garbage")
    with pytest.raises(ValueError, match="model.safetensors: the weights are damaged"):
        load_model_dir(tmp_path)
    _edit_config(tmp_path, lambda c: c.pop("sha256"))  # as a directory saved before hashes
    with pytest.raises(ValueError, match="model.safetensors: unreadable"):
        load_model_dir(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json: not valid JSON"):
        load_model_dir(tmp_path)


def test_weights_that_do_not_fit_the_config_are_named(tmp_path, tiny):
    save_model_dir(tmp_path, build_model(tiny))
    _edit_config(tmp_path, lambda c: c["model"].update(d_ff=48))
    with pytest.raises(ValueError, match=r"config.json does not describe these weights: d_ff = 48"):
        load_model_dir(tmp_path)
    # without the architecture record (a directory saved before it), the shapes still decide
    weights = str(tmp_path / "model.safetensors")
    with safe_open(weights, "pt") as f:
        metadata = {k: v for k, v in f.metadata().items() if k != "aiayn_config"}
    save_file(load_file(weights), weights, metadata=metadata)
    _edit_config(tmp_path, lambda c: c.pop("sha256"))
    with pytest.raises(ValueError, match=r"ffn.linear1.weight has shape \(64, 32\).*\(48, 32\)"):
        load_model_dir(tmp_path)
    _edit_config(tmp_path, lambda c: c["model"].update(d_ff=64, n_encoder_layers=3))
    with pytest.raises(ValueError, match="missing .*encoder.layers.2"):
        load_model_dir(tmp_path)


@pytest.mark.parametrize("key", ["n_heads", "d_model", "norm_first", "family", "activation"])
def test_every_architecture_key_is_required(tmp_path, tiny, key):
    save_model_dir(tmp_path, build_model(tiny))
    _edit_config(tmp_path, lambda c: c["model"].pop(key))
    with pytest.raises(UserError, match=f"config.json: missing architecture key.*{key}"):
        load_model_dir(tmp_path)


def test_training_only_keys_keep_their_defaults(tmp_path, tiny):
    save_model_dir(tmp_path, build_model(tiny))
    _edit_config(tmp_path, lambda c: c["model"].pop("dropout"))
    assert load_model_dir(tmp_path).config.dropout == ModelConfig().dropout


@pytest.mark.parametrize("text", ["null", "[]", '{"model": null}', '{"model": [1]}', "\xff"])
def test_a_config_that_is_no_table_is_named(tmp_path, tiny, text):
    save_model_dir(tmp_path, build_model(tiny))
    (tmp_path / "config.json").write_bytes(text.encode("latin-1"))
    with pytest.raises(UserError, match="config.json"):
        load_model_dir(tmp_path)


def test_a_changed_byte_in_the_weights_is_caught(tmp_path, tiny):
    save_model_dir(tmp_path, build_model(tiny))
    path = tmp_path / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # inside the tensor data: the file still parses
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="model.safetensors: the weights are damaged"):
        load_model_dir(tmp_path)


def test_a_config_edited_with_the_same_shapes_is_caught(tmp_path, tiny):
    save_model_dir(tmp_path, build_model(tiny))  # d_model 32, 2 heads: 4 heads fit the shapes
    _edit_config(tmp_path, lambda c: c["model"].update(n_heads=4))
    with pytest.raises(UserError, match=r"does not describe these weights: n_heads = 4 .*2\)"):
        load_model_dir(tmp_path)


def test_equal_weights_give_equal_bytes(tmp_path, tiny):
    model = build_model(tiny)
    for name in "abcde":  # the writer's metadata order changes from one save to the next
        save_model_dir(tmp_path / name, model, metadata={"note": "x", "more": "y"})
    files = {(tmp_path / n / "model.safetensors").read_bytes() for n in "abcde"}
    assert len(files) == 1
    assert len({(tmp_path / n / "config.json").read_bytes() for n in "abcde"}) == 1


def test_the_file_is_the_safetensors_writers_own_and_holds_no_copy_of_the_weights(tmp_path):
    from safetensors.torch import save as save_bytes

    from aiayn.modeldir.weights import safetensors_parts

    g = torch.Generator().manual_seed(0)
    tensors = {
        "w": torch.randn(7, 5, generator=g),
        "half": torch.randn(3, generator=g).half(),
        "bf": torch.randn(2, 2, generator=g).bfloat16(),
        "q": torch.randint(-128, 127, (9,), dtype=torch.int8, generator=g),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "mask": torch.tensor([True, False, True]),
        "empty": torch.zeros(0, 4),
        "ids": torch.arange(6, dtype=torch.int64).reshape(2, 3),
    }
    metadata = {"b": "2", "a": "1", "c": "é"}
    parts = safetensors_parts(tensors, metadata)
    data = b"".join(bytes(p) for p in parts)
    # the reference: the library's own file, with its metadata keys sorted
    reference = save_bytes(tensors, metadata=metadata)
    n = int.from_bytes(reference[:8], "little")
    header = json.loads(reference[8 : 8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    assert data == len(text).to_bytes(8, "little") + text + reference[8 + n :]
    # each tensor's bytes are a view of the tensor itself
    pointers = {p.obj.__array_interface__["data"][0] for p in parts[1:] if p.nbytes}
    assert pointers == {t.data_ptr() for t in tensors.values() if t.numel()}


def test_the_tokenizer_must_fit_the_model(tmp_path, tiny):
    from aiayn.data.tokenizer import CharTokenizer
    from aiayn.modeldir import load_model_and_tokenizer

    tokenizer = CharTokenizer.train(["abc"])  # 8 tokens, the model has 64
    save_model_dir(tmp_path, build_model(tiny))
    tokenizer.save(tmp_path)
    with pytest.raises(UserError, match="tokenizer.json: the tokenizer has 8 tokens, but the"):
        load_model_and_tokenizer(tmp_path)
    (tmp_path / "tokenizer.model").write_bytes(b"stray")
    with pytest.raises(UserError, match="holds two tokenizers"):
        load_model_and_tokenizer(tmp_path)


def test_the_shipped_model_carries_its_hash():
    from tests.conftest import REPO_ROOT

    directory = REPO_ROOT / "models" / "ding-de-en"
    recorded = json.loads((directory / "config.json").read_text())["sha256"]
    from aiayn.fileio import file_sha256

    assert recorded == {"model.safetensors": file_sha256(directory / "model.safetensors")}


def test_a_model_directory_value_hashes_its_weights_once(tmp_path, tiny, monkeypatch):
    """One ``ModelDir`` reads its weights' hash once, whoever asks: the model, the
    fingerprint a conversion cache keys on, and the weights' digest itself."""
    from aiayn.modeldir import ModelDir, weights

    save_model_dir(tmp_path, build_model(tiny))
    hashed = []
    original = weights.file_sha256
    monkeypatch.setattr(weights, "file_sha256", lambda p: hashed.append(p) or original(p))
    directory = ModelDir(tmp_path)
    directory.model()
    digest = directory.weights_sha256()
    assert directory.fingerprint()["weights_sha256"] == digest
    assert hashed == [tmp_path / "model.safetensors"]
    assert digest == original(tmp_path / "model.safetensors")


@pytest.mark.parametrize(
    ("run", "quantization", "words"),
    [
        ({"weights": {"kind": "last", "step": 7}}, None, "the last weights (step 7)"),
        (
            {"weights": {"kind": "best", "step": 4, "valid_accuracy": 0.8125}},
            None,
            "the weights of the best validation (step 4, valid accuracy 0.8125)",
        ),
        (
            {
                "weights": {
                    "kind": "average",
                    "checkpoints": [{"file": "a", "step": 3}, {"file": "b", "step": 6}],
                }
            },  # fmt: skip
            {"method": "int8", "include_output": False},
            "the average of 2 checkpoints (steps 3, 6), quantized to int8 (the projection to "
            "the vocabulary kept in float32)",
        ),
        # an int8 copy of a directory that records nothing: the copy names its source
        (
            {"weights": {"quantized": {"method": "int8"}, "from": "imported/opus"}},
            {"method": "int8"},
            "the weights of imported/opus, quantized to int8",
        ),
        # written before the record: a training summary's words, the names average listed
        ({"summary": {"weights": "the last weights (step 9)"}}, None, "the last weights (step 9)"),
        ({"averaged": ["checkpoint-1.pt"]}, None, "the average of 1 checkpoint (checkpoint-1.pt)"),
        ({}, None, None),
    ],
)
def test_run_json_says_which_weights_a_directory_holds(run, quantization, words):
    from aiayn.modeldir import provenance

    assert provenance.describe(run, quantization) == words


def test_the_shipped_model_says_how_it_was_made():
    from aiayn.modeldir import ModelDir
    from tests.conftest import REPO_ROOT

    directory = ModelDir(REPO_ROOT / "models" / "ding-de-en")
    assert directory.describe_weights().startswith("the average of 5 checkpoints (steps 14400,")
    made = directory.run["made"]
    assert made["commands"][0] == f"aiayn train {made['config']} --out runs/ding-de-en"
    assert (REPO_ROOT / made["config"]).is_file()
