"""What import cannot convert is an error naming the file and the field, never a traceback
deep in a state dict or a silently different model."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from aiayn.cli import main
from aiayn.interop.hf import import_hf
from tests.interop.hf_fixtures import (
    bert_model,
    bert_tokenizer,
    byte_bpe_tokenizer,
    gpt2_model,
    marian_model,
    marian_tokenizer,
)

pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


def edit_config(directory, **changes):
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_unknown_families_fields_and_tensors_are_named(tmp_path):
    directory = tmp_path / "bert"
    bert_tokenizer(directory)
    bert_model(directory)
    tensors = load_file(directory / "model.safetensors")
    save_file(
        {**tensors, "bert.encoder.layer.0.adapter.weight": torch.zeros(2)},
        directory / "model.safetensors",
    )
    with pytest.raises(ValueError, match="does not use: bert.encoder.layer.0.adapter.weight"):
        import_hf(directory, tmp_path / "out")
    save_file(
        {k: v for k, v in tensors.items() if "pooler" not in k or "bias" not in k},
        directory / "model.safetensors",
    )
    with pytest.raises(ValueError, match="lacks bert.pooler.dense.bias"):
        import_hf(directory, tmp_path / "out")
    edit_config(directory, model_type="t5")
    with pytest.raises(
        ValueError, match="model_type='t5' is not supported; allowed: bert, gpt2, marian"
    ):
        import_hf(directory, tmp_path / "out")
    edit_config(directory, model_type="bert", hidden_act="gelu_fast")
    with pytest.raises(ValueError, match="hidden_act='gelu_fast' is not supported"):
        import_hf(directory, tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="not a model directory"):
        import_hf(tmp_path / "nowhere", tmp_path / "out")


def test_marian_without_its_tokenizer_or_with_a_tie_aiayn_lacks(tmp_path):
    directory = tmp_path / "marian"
    marian_model(directory, marian_tokenizer(directory))
    edit_config(directory, share_encoder_decoder_embeddings=True, tie_word_embeddings=False)
    with pytest.raises(ValueError, match="tie_word_embeddings=false is not supported"):
        import_hf(directory, tmp_path / "out")
    edit_config(directory, tie_word_embeddings=True, decoder_ffn_dim=64)
    with pytest.raises(ValueError, match="encoder_ffn_dim=48 differs from decoder_ffn_dim=64"):
        import_hf(directory, tmp_path / "out")
    edit_config(directory, decoder_ffn_dim=48)
    (directory / "target.spm").unlink()
    with pytest.raises(FileNotFoundError, match="no target.spm"):
        import_hf(directory, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing half-written


@pytest.mark.parametrize("content", ["null", "[1, 2]", '"bert"', "3"])
def test_a_config_json_that_is_not_an_object_is_named(tmp_path, capsys, content):
    from aiayn.cli import main

    directory = tmp_path / "bert"
    bert_tokenizer(directory)
    bert_model(directory)
    (directory / "config.json").write_text(content)
    with pytest.raises(ValueError, match=r"config.json: expected a JSON object"):
        import_hf(directory, tmp_path / "out")
    assert main(["import", str(directory), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "config.json: expected a JSON object" in err and "internal error" not in err
    assert not (tmp_path / "out").exists()


def gpt2_dir(tmp_path):
    directory = tmp_path / "gpt2"
    reference = byte_bpe_tokenizer(directory)
    eos = reference.convert_tokens_to_ids("<|endoftext|>")
    gpt2_model(directory, len(reference), eos)
    return directory, eos


def test_a_gpt2_whose_tokenizer_lacks_its_eos_names_the_file_and_the_field(tmp_path):
    directory, eos = gpt2_dir(tmp_path)
    path = directory / "tokenizer.json"
    data = json.loads(path.read_text())
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != "<|endoftext|>"]
    path.write_text(json.dumps(data))
    with pytest.raises(
        ValueError, match=rf"tokenizer.json: no token with id {eos}, the eos_token_id of config"
    ):
        import_hf(directory, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_gpt2_eos_left_out_of_config_json_is_gpt2configs_and_refused_by_name(tmp_path):
    directory, _ = gpt2_dir(tmp_path)
    path = directory / "config.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in data.items() if k != "eos_token_id"}))
    with pytest.raises(
        ValueError,
        match=r"eos_token_id=50256 is not an id below vocab_size=\d+ \(GPT2Config's default",
    ):
        import_hf(directory, tmp_path / "out")


def test_a_missing_directory_is_named_before_what_the_hub_said(tmp_path, monkeypatch, capsys):
    huggingface_hub = pytest.importorskip("huggingface_hub")

    def offline(repo_id, **kwargs):
        raise OSError(
            "Cannot find an appropriate cached snapshot folder for the specified revision on "
            "the local disk and outgoing traffic has been disabled.\nSecond line."
        )

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    assert main(["import", "some/dir", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "some/dir: no such local directory; as a Hugging Face hub name: Cannot find" in err
    assert "Second line" not in err and not (tmp_path / "x").exists()
