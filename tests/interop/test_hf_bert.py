"""BERT in and out: logits equal transformers' on padded random batches, token ids equal its
tokenizer's, and the weights survive export(import(x)) bit for bit."""

import pytest
import torch
from safetensors.torch import load_file

from aiayn.config import ModelConfig
from aiayn.data.hf_tokenizer import HFTokenizer
from aiayn.data.vocab_map import VocabMap
from aiayn.interop import hf_bert
from aiayn.interop.hf import export_hf, import_hf
from aiayn.model import build_model
from aiayn.modeldir import load_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.interop.hf_fixtures import bert_model, bert_tokenizer, wordpiece_vocab
from tests.tolerance import assert_close_to_scale

transformers = pytest.importorskip("transformers")

TEXTS = ["The cat sat on the mat.", "a big red house", "Dogs ran, fast!", "zebra?"]


def batch(n_their: int, pad: int, seed: int = 0):
    """Random ids (B, T) of theirs with right padding, and the attention mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, n_their, (3, 9), generator=g)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 6:] = False
    mask[2, 3:] = False
    ids[~mask] = pad
    ids[ids == pad] = 1 if pad != 1 else 2  # no pad inside the real tokens
    ids[~mask] = pad
    return ids, mask


def to_ours(tokenizer, ids):
    return torch.tensor([tokenizer.vocab_map.to_ours(row) for row in ids.tolist()])


@pytest.fixture
def bert_dir(tmp_path):
    directory = tmp_path / "hf"
    bert_tokenizer(directory)
    return directory


@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu", "silu"])
def test_sequence_classifier_logits_equal_transformers(bert_dir, tmp_path, act):
    theirs = bert_model(bert_dir, hidden_act=act)
    summary = import_hf(bert_dir, tmp_path / "ours")
    assert summary["architecture"] == "BertForSequenceClassification"
    model, tok = load_model_dir(tmp_path / "ours"), load_tokenizer(tmp_path / "ours")
    assert model.config.activation == {"gelu_new": "gelu_tanh", "silu": "swish"}.get(act, act)
    ids, mask = batch(theirs.config.vocab_size, theirs.config.pad_token_id)
    ours_ids = to_ours(tok, ids)
    assert ((ours_ids == 0) == ~mask).all()  # their pad is our pad
    with torch.no_grad():
        ref = theirs(input_ids=ids, attention_mask=mask.long())
        hidden = theirs.bert(input_ids=ids, attention_mask=mask.long()).last_hidden_state
        assert_close_to_scale(model.encode(ours_ids)[mask], hidden[mask])
        assert_close_to_scale(model.classify(ours_ids), ref.logits)
    import json

    labels = json.loads((tmp_path / "ours" / "run.json").read_text())["labels"]
    assert labels == ["neg", "neutral", "pos"]


def test_masked_lm_logits_equal_transformers_untied(bert_dir, tmp_path):
    theirs = bert_model(bert_dir, "BertForMaskedLM", tie_word_embeddings=False)
    import_hf(bert_dir, tmp_path / "ours")
    model, tok = load_model_dir(tmp_path / "ours"), load_tokenizer(tmp_path / "ours")
    assert model.config.tie_embeddings == "none" and model.config.final_logits_bias
    ids, mask = batch(theirs.config.vocab_size, 0, seed=1)
    with torch.no_grad():
        ref = theirs(input_ids=ids, attention_mask=mask.long()).logits  # (B, T, V_theirs)
        ours = model(to_ours(tok, ids))  # (B, T, V_ours)
    src, _ = tok.vocab_map.index()
    assert_close_to_scale(ours[mask][:, src >= 0], ref[mask][:, src[src >= 0]])
    assert tok.vocab_map.extras == []  # BERT has all five special tokens


@pytest.mark.parametrize("act", ["gelu", "gelu_new", "silu", "relu"])
def test_masked_lm_head_applies_hidden_act_as_transformers_does(bert_dir, tmp_path, act):
    """BertPredictionHeadTransform applies config.hidden_act, not always exact GELU."""
    theirs = bert_model(bert_dir, "BertForMaskedLM", hidden_act=act)
    import_hf(bert_dir, tmp_path / "ours")
    model, tok = load_model_dir(tmp_path / "ours"), load_tokenizer(tmp_path / "ours")
    assert model.config.mlm_activation == model.config.activation
    ids, mask = batch(theirs.config.vocab_size, 0, seed=2)
    with torch.no_grad():
        ref = theirs(input_ids=ids, attention_mask=mask.long()).logits  # (B, T, V_theirs)
        ours = model(to_ours(tok, ids))  # (B, T, V_ours)
    src, _ = tok.vocab_map.index()
    assert_close_to_scale(ours[mask][:, src >= 0], ref[mask][:, src[src >= 0]])
    export_hf(tmp_path / "ours", tmp_path / "back")
    reloaded = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "back").eval()
    assert reloaded.config.hidden_act == act
    with torch.no_grad():
        again = reloaded(input_ids=ids, attention_mask=mask.long()).logits
    assert_close_to_scale(again, ref)


def test_export_refuses_a_masked_lm_head_whose_activation_bert_cannot_express(tmp_path):
    config = ModelConfig.preset(
        "tiny", family="encoder-only", n_decoder_layers=0, activation="relu",
        pos_encoding="learned", embed_scale=False, embedding_layer_norm=True, n_token_types=2,
    )  # fmt: skip
    with pytest.raises(ValueError, match="mlm_activation='gelu' differs from activation='relu'"):
        hf_bert.export_parts(build_model(config), _wordpiece(tmp_path), {})


def _wordpiece(tmp_path):
    """The fixture's WordPiece tokenizer with its specials at aiayn's ids."""
    bert_tokenizer(tmp_path / "tok")
    text = (tmp_path / "tok" / "tokenizer.json").read_text()
    n = len(wordpiece_vocab())
    return HFTokenizer(text, VocabMap(n, (0, 7, 8, 9, 10), backend="tokenizers"))


def test_token_ids_equal_the_transformers_tokenizer(bert_dir, tmp_path):
    bert_model(bert_dir)
    import_hf(bert_dir, tmp_path / "ours")
    tok = load_tokenizer(tmp_path / "ours")
    reference = transformers.AutoTokenizer.from_pretrained(bert_dir)
    ours = tok.encode(TEXTS, eos=True)
    assert [tok.vocab_map.to_theirs(x) for x in ours] == reference(TEXTS)["input_ids"]
    assert tok.decode(ours) == reference.batch_decode(
        reference(TEXTS)["input_ids"], skip_special_tokens=True
    )
    assert tok.folds_case and ours[0][0] == tok.bos_id and ours[0][-1] == tok.eos_id


def test_export_of_the_import_is_the_checkpoint_bit_for_bit(bert_dir, tmp_path):
    bert_model(bert_dir)
    import_hf(bert_dir, tmp_path / "ours")
    export_hf(tmp_path / "ours", tmp_path / "back")
    original, back = (
        load_file(bert_dir / "model.safetensors"),
        load_file(tmp_path / "back" / "model.safetensors"),
    )
    assert sorted(original) == sorted(back)
    for name, t in original.items():
        assert torch.equal(back[name], t), name
    reloaded = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "back")
    assert reloaded.config.id2label == {0: "neg", 1: "neutral", 2: "pos"}
    import_hf(tmp_path / "back", tmp_path / "again")
    a, b = (
        load_model_dir(tmp_path / "ours").state_dict(),
        load_model_dir(tmp_path / "again").state_dict(),
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_sentence_encoder_imports_its_mean_pooling(tmp_path):
    """A bare BertModel as sentence-transformers ships it: no 'bert.' prefix, a vocab.txt
    instead of tokenizer.json, 1_Pooling/config.json asking for mean pooling."""
    import json

    directory = tmp_path / "hf"
    bert_tokenizer(directory)
    (directory / "tokenizer.json").unlink()
    (directory / "vocab.txt").write_text("\n".join(wordpiece_vocab()) + "\n")
    cfg = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(
        json.dumps({**cfg, "do_lower_case": True, "tokenizer_class": "BertTokenizer"})
    )
    (directory / "1_Pooling").mkdir()
    (directory / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_mean_tokens": True})
    )
    theirs = bert_model(directory, "BertModel")
    import_hf(directory, tmp_path / "ours")
    model, tok = load_model_dir(tmp_path / "ours"), load_tokenizer(tmp_path / "ours")
    assert model.config.pooling == "mean" and model.config.pooler == "tanh"
    slow = transformers.AutoTokenizer.from_pretrained(directory)
    enc = slow(TEXTS, padding=True, return_tensors="pt")
    ours_ids = [tok.vocab_map.to_theirs(x) for x in tok.encode(TEXTS, eos=True)]
    assert ours_ids == [
        row[: int(m.sum())]
        for row, m in zip(enc["input_ids"].tolist(), enc["attention_mask"], strict=True)
    ]
    with torch.no_grad():
        h = theirs(**enc).last_hidden_state
        mask = enc["attention_mask"][..., None].float()
        expected = (h * mask).sum(1) / mask.sum(1)
        ids = to_ours(tok, enc["input_ids"])
        pooled = model.pool(model.encode(ids), ids)
    assert_close_to_scale(pooled, expected)


def test_cli_import_refuses_a_bad_checkpoint_with_a_clear_error(tmp_path, capsys, monkeypatch):
    import json

    from aiayn.cli import main

    directory = tmp_path / "hf"
    bert_tokenizer(directory)
    bert_model(directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(
        json.dumps({**config, "position_embedding_type": "relative_key"})
    )
    assert main(["import", str(directory), "--out", str(tmp_path / "ours")]) == 2
    assert "position_embedding_type='relative_key' is not supported" in capsys.readouterr().err
    (directory / "config.json").write_text(
        json.dumps({**config, "architectures": ["BertForQuestionAnswering"]})
    )
    assert main(["import", str(directory), "--out", str(tmp_path / "ours")]) == 2
    assert "architectures=['BertForQuestionAnswering'] is not supported" in capsys.readouterr().err
    (directory / "config.json").write_text(json.dumps(config))
    assert main(["import", str(directory), "--out", str(tmp_path / "ours")]) == 0
    assert "BertForSequenceClassification" in capsys.readouterr().out
    assert main(["import", str(directory), "--out", str(tmp_path / "ours")]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    # aiayn classify on the imported directory gives transformers' labels and probabilities
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(directory)
    reference = transformers.AutoTokenizer.from_pretrained(directory)
    with torch.no_grad():
        probs = theirs(**reference(TEXTS, padding=True, return_tensors="pt")).logits.softmax(-1)
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(TEXTS) + "\n"))
    assert main(["classify", str(tmp_path / "ours")]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    for line, row in zip(lines, probs, strict=True):
        label, p = line.split("\t")
        assert label == theirs.config.id2label[int(row.argmax())]
        assert abs(float(p) - float(row.max())) < 1e-4  # absolute: printed with 4 decimals


def test_an_aiayn_classifier_exported_as_bert_gives_its_logits_in_transformers(bert_dir, tmp_path):
    from aiayn import build_model
    from aiayn.modeldir import save_model_dir

    bert_model(bert_dir)
    import_hf(bert_dir, tmp_path / "ours")
    config = load_model_dir(tmp_path / "ours").config.replace(activation="gelu_tanh", n_classes=2)
    torch.manual_seed(3)
    model = build_model(config).eval()
    save_model_dir(tmp_path / "mine", model)
    tok = load_tokenizer(tmp_path / "ours")
    tok.save(tmp_path / "mine")
    export_hf(tmp_path / "mine", tmp_path / "out")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "out")
    ids, mask = batch(theirs.config.vocab_size, 0, seed=2)
    with torch.no_grad():
        ref = theirs(input_ids=ids, attention_mask=mask.long()).logits
        ours = model.classify(to_ours(tok, ids))
    assert_close_to_scale(ours, ref)
    with pytest.raises(ValueError, match="pooling='mean' has no BertForSequenceClassification"):
        save_model_dir(tmp_path / "mean", build_model(config.replace(pooling="mean")))
        tok.save(tmp_path / "mean")
        export_hf(tmp_path / "mean", tmp_path / "out2")
