"""A key that a Hugging Face config.json leaves out means the default of the reference config
class (MarianConfig, BertConfig, GPT2Config), as transformers reads it: never the value the
popular checkpoints happen to use, and never a default of aiayn's own."""

import json

import pytest
import torch

from aiayn.data.tokenizer import PAD
from aiayn.interop import hf_bert, hf_gpt2, hf_marian
from aiayn.interop.hf import import_hf
from aiayn.modeldir import load_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.interop.hf_fixtures import (
    bert_model,
    bert_tokenizer,
    byte_bpe_tokenizer,
    gpt2_model,
    marian_model,
    marian_tokenizer,
)
from tests.tolerance import assert_close_to_scale

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


@pytest.mark.parametrize("table", [hf_bert, hf_gpt2, hf_marian], ids=["bert", "gpt2", "marian"])
def test_each_default_a_table_reads_is_the_reference_class_default(table):
    reference = getattr(transformers, table.REFERENCE)()
    for key, value in table.CONFIG_DEFAULTS.items():
        assert hasattr(reference, key), f"{table.REFERENCE} has no {key}"
        assert getattr(reference, key) == value, key


def drop_keys(directory, keys):
    path = directory / "config.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in data.items() if k not in keys}))


def test_marian_without_activation_and_scale_takes_marian_configs_gelu_and_no_scale(tmp_path):
    directory = tmp_path / "hf"
    n = marian_tokenizer(directory)
    marian_model(directory, n, activation_function="gelu", scale_embedding=False)
    dropped = ("activation_function", "scale_embedding", "max_position_embeddings", "dropout")
    drop_keys(directory, dropped)
    theirs = transformers.MarianMTModel.from_pretrained(directory).eval()  # as it reads them
    import_hf(directory, tmp_path / "ours")
    model, tok = load_model_dir(tmp_path / "ours"), load_tokenizer(tmp_path / "ours")
    assert model.config.activation == "gelu" and not model.config.embed_scale
    assert model.config.max_len == 1024 and model.config.dropout == 0.1
    pad = theirs.config.pad_token_id
    g = torch.Generator().manual_seed(0)
    src = torch.randint(0, n - 1, (2, 7), generator=g)
    tgt = torch.randint(0, n - 1, (2, 5), generator=g)
    tgt[:, 0] = pad
    with torch.no_grad():
        ref = theirs(input_ids=src, decoder_input_ids=tgt).logits  # (B, T, V_theirs)
        ours_src = torch.tensor([tok.vocab_map.to_ours(r) for r in src.tolist()])
        ours_tgt = torch.tensor([tok.vocab_map.to_ours(r) for r in tgt.tolist()])
        ours_tgt[:, 0] = 2  # aiayn's bos: where Marian starts from its pad
        ours = model(ours_src, ours_tgt)  # (B, T, V_ours)
    src_of, _ = tok.vocab_map.index()
    real = src_of >= 0
    assert_close_to_scale(ours[..., real], ref[..., src_of[real]])
    assert tok.vocab_map.extras == [PAD, 4]


def test_marian_special_ids_left_out_take_the_class_defaults_and_are_refused_by_name(tmp_path):
    directory = tmp_path / "hf"
    marian_model(directory, marian_tokenizer(directory))
    drop_keys(directory, ("pad_token_id", "decoder_start_token_id"))
    with pytest.raises(
        ValueError,
        match=r"pad_token_id=58100 is not an id below vocab_size=\d+ \(MarianConfig's default",
    ):
        import_hf(directory, tmp_path / "ours")


def test_bert_without_the_defaulted_keys_equals_transformers(tmp_path):
    directory = tmp_path / "hf"
    bert_tokenizer(directory)
    bert_model(directory, "BertForMaskedLM")
    drop_keys(directory, [k for k in hf_bert.CONFIG_DEFAULTS if k != "architectures"])
    theirs = transformers.BertForMaskedLM.from_pretrained(directory).eval()
    import_hf(directory, tmp_path / "ours")
    model, tok = load_model_dir(tmp_path / "ours"), load_tokenizer(tmp_path / "ours")
    assert model.config.layer_norm_eps == 1e-12 and model.config.n_token_types == 2
    ids = torch.randint(
        1, theirs.config.vocab_size, (2, 6), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        ref = theirs(input_ids=ids).logits
        ours = model(torch.tensor([tok.vocab_map.to_ours(r) for r in ids.tolist()]))
    src, _ = tok.vocab_map.index()
    assert_close_to_scale(ours[..., src >= 0], ref[..., src[src >= 0]])


def gpt2_dir(tmp_path, **config):
    directory = tmp_path / "hf"
    reference = byte_bpe_tokenizer(directory)
    eos = reference.convert_tokens_to_ids("<|endoftext|>")
    gpt2_model(directory, len(reference), eos, **config)
    return directory, eos, len(reference)


def test_gpt2_without_the_defaulted_keys_equals_transformers(tmp_path):
    directory, eos, _ = gpt2_dir(tmp_path)
    keys = [
        k
        for k in hf_gpt2.CONFIG_DEFAULTS
        if k not in ("architectures", "n_embd", "n_head", "n_layer", "n_positions")
        and not k.endswith("token_id")
    ]
    drop_keys(directory, keys)
    theirs = transformers.GPT2LMHeadModel.from_pretrained(directory).eval()
    import_hf(directory, tmp_path / "ours")
    model, tok = load_model_dir(tmp_path / "ours"), load_tokenizer(tmp_path / "ours")
    assert model.config.activation == "gelu_tanh" and model.config.d_ff == 4 * 32
    ids = torch.randint(
        0, theirs.config.vocab_size, (2, 6), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        ref = theirs(input_ids=ids).logits
        ours = model(torch.tensor([tok.vocab_map.to_ours(r) for r in ids.tolist()]))
    src, _ = tok.vocab_map.index()
    assert_close_to_scale(ours[..., src >= 0], ref[..., src[src >= 0]])
