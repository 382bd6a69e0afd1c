"""Marian in: logits, token ids, greedy and beam search equal transformers' on an OPUS-MT-like
random model, for each supported option, and the checkpoint survives export(import(x))."""

import pytest
import torch
from safetensors.torch import load_file

from aiayn.data.tokenizer import BOS, EOS, PAD
from aiayn.infer.beam import beam_decode
from aiayn.infer.greedy import greedy_decode
from aiayn.interop.hf import export_hf, import_hf
from aiayn.modeldir import load_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.interop.hf_fixtures import marian_model, marian_tokenizer
from tests.tolerance import assert_close_to_scale

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

SOURCES = ["Das Haus ist groß.", "Er kam nicht.", "ein kleines Boot", "Zähne putzen!"]


def imported(tmp_path, **config):
    directory = tmp_path / "hf"
    n = marian_tokenizer(directory)
    theirs = marian_model(directory, n, **config)
    import_hf(directory, tmp_path / "ours")
    return theirs, load_model_dir(tmp_path / "ours"), load_tokenizer(tmp_path / "ours")


def padded(rows, pad):
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows])


def random_pair(n_their, pad, start, seed=0):
    """Their source (B, S) and decoder input (B, T) with right padding; masks."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n_their - 1, (3, 9), generator=g)
    tgt = torch.randint(0, n_their - 1, (3, 7), generator=g)
    tgt[:, 0] = start
    src_mask, tgt_mask = (
        torch.ones_like(src, dtype=torch.bool),
        torch.ones_like(tgt, dtype=torch.bool),
    )
    src_mask[1, 5:], src_mask[2, 2:], tgt_mask[0, 4:], tgt_mask[2, 6:] = False, False, False, False
    return src.masked_fill(~src_mask, pad), tgt.masked_fill(~tgt_mask, pad), src_mask, tgt_mask


def ours_ids(tok, ids, mask, first_is_bos=False):
    out = torch.tensor([tok.vocab_map.to_ours(r) for r in ids.tolist()]).masked_fill(~mask, PAD)
    if first_is_bos:
        out[:, 0] = BOS
    return out


OPTIONS = [
    {},
    {"activation_function": "relu", "scale_embedding": False},
    {
        "activation_function": "gelu",
        "d_model": 30,
        "encoder_attention_heads": 3,
        "decoder_attention_heads": 3,
    },
    {"share_encoder_decoder_embeddings": False},
    {"share_encoder_decoder_embeddings": False, "tie_word_embeddings": False},
]


@pytest.mark.parametrize("config", OPTIONS)
def test_logits_equal_transformers_on_a_padded_batch(tmp_path, config):
    theirs, model, tok = imported(tmp_path, **config)
    pad = theirs.config.pad_token_id
    src, tgt, src_mask, tgt_mask = random_pair(theirs.config.vocab_size, pad, pad)
    with torch.no_grad():
        ref = theirs(
            input_ids=src,
            attention_mask=src_mask.long(),
            decoder_input_ids=tgt,
            decoder_attention_mask=tgt_mask.long(),
        ).logits
        ours = model(ours_ids(tok, src, src_mask), ours_ids(tok, tgt, tgt_mask, first_is_bos=True))
    src_of, _ = tok.vocab_map.index()
    real = src_of >= 0
    assert_close_to_scale(ours[tgt_mask][:, real], ref[tgt_mask][:, src_of[real]])
    assert torch.isneginf(ours[..., ~real]).all()
    assert tok.vocab_map.extras == [PAD, 4]  # OPUS-MT: pad is the start token; no mask


def test_token_ids_equal_the_transformers_tokenizer(tmp_path):
    _, _, tok = imported(tmp_path)
    reference = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    ours = tok.encode(SOURCES, eos=True)
    assert [tok.vocab_map.to_theirs(x) for x in ours] == reference(SOURCES)["input_ids"]
    targets = ["The house is big.", "He did not come."]
    expected = reference(["x"] * len(targets), text_target=targets)["labels"]
    assert [tok.vocab_map.to_theirs(x + [EOS]) for x in tok.encode_target(targets)] == expected
    assert tok.decode([tok.vocab_map.to_ours(x) for x in expected]) == reference.batch_decode(
        expected, skip_special_tokens=True
    )


@pytest.mark.parametrize("config", [OPTIONS[0], OPTIONS[3]])
def test_greedy_and_beam_search_equal_generate(tmp_path, config):
    theirs, model, tok = imported(tmp_path, **config)
    reference = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    eos, offset, produced = theirs.config.eos_token_id, 6, set()
    for text in SOURCES:
        src = reference([text], return_tensors="pt")["input_ids"]
        ours_src = torch.tensor([tok.vocab_map.to_ours(src[0].tolist())])
        common = dict(
            max_new_tokens=src.size(1) + offset,
            do_sample=False,
            bad_words_ids=None,
            forced_eos_token_id=None,
        )
        with torch.no_grad():
            ref = theirs.generate(src, num_beams=1, **common)[0, 1:].tolist()
        got = greedy_decode(model, ours_src, max_len_offset=offset)[0].tolist()
        ref = ref[: ref.index(eos) + 1] if eos in ref else ref
        assert tok.vocab_map.to_theirs([t for t in got if t != PAD]) == ref
        produced.update(ref)
        with torch.no_grad():
            ref = theirs.generate(
                src, num_beams=4, length_penalty=0.0, early_stopping=False, **common
            )
        ref = ref[0, 1:].tolist()
        ref = ref[: ref.index(eos) + 1] if eos in ref else ref
        hyps = beam_decode(model, ours_src, beam=4, alpha=0.0, max_len_offset=offset)
        assert tok.vocab_map.to_theirs(hyps[0][0].tokens) == ref
    assert len(produced) > 3


def test_export_of_the_import_is_the_checkpoint_bit_for_bit(tmp_path):
    imported(tmp_path)
    export_hf(tmp_path / "ours", tmp_path / "back")
    original = load_file(tmp_path / "hf" / "model.safetensors")
    back = load_file(tmp_path / "back" / "model.safetensors")
    assert sorted(back) == sorted(original)
    for name, t in original.items():
        assert torch.equal(back[name], t), name
    for name in ("source.spm", "target.spm"):
        assert (tmp_path / "back" / name).read_bytes() == (tmp_path / "hf" / name).read_bytes()
    import json

    assert json.loads((tmp_path / "back" / "vocab.json").read_text()) == json.loads(
        (tmp_path / "hf" / "vocab.json").read_text()
    )


def test_an_imported_marian_fine_tunes_with_aiayns_loop(tmp_path):
    """train.init_from = the imported directory: Marian's target model cuts the targets, the
    extra rows (logit -inf) take no label-smoothing mass, the loss stays finite."""
    import json
    import math

    from aiayn.config import RunConfig
    from aiayn.infer.translate import translate_best
    from aiayn.train.loop import train
    from tests.conftest import write_sample_corpus

    imported(tmp_path)
    corpus = write_sample_corpus(tmp_path / "corpus", n_train=60, n_valid=10, n_test=10)
    model_table = json.loads((tmp_path / "ours" / "config.json").read_text())["model"]
    run = RunConfig.from_dict(
        {
            "model": model_table,
            "data": {"corpus": str(corpus), "max_len": 60},
            "train": {
                "init_from": str(tmp_path / "ours"),
                "max_steps": 3,
                "max_tokens": 300,
                "warmup": 2,
                "lr_scale": 0.5,
                "threads": 1,
                "log_every": 1,
            },
        }
    )
    summary = train(run, tmp_path / "run", progress=False)
    records = [
        json.loads(line)
        for line in (tmp_path / "run" / "metrics.jsonl").read_text().split("\n")
        if line
    ]
    losses = [r["loss"] for r in records if "loss" in r]
    assert losses and all(math.isfinite(x) for x in losses) and summary
    model_dir = next(p.parent for p in (tmp_path / "run").rglob("model.safetensors"))
    model, tok = load_model_dir(model_dir), load_tokenizer(model_dir)
    assert type(tok).__name__ == "MarianTokenizer"
    assert len(translate_best(model, tok, SOURCES[:2])) == 2


def test_the_cli_translates_and_evaluates_an_imported_marian(tmp_path, capsys, monkeypatch):
    import io
    import json

    from aiayn.cli import main
    from tests.conftest import write_sample_corpus

    imported(tmp_path)
    corpus = write_sample_corpus(tmp_path / "corpus", n_train=5, n_valid=5, n_test=5)
    ours = str(tmp_path / "ours")
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(SOURCES) + "\n"))
    assert main(["translate", ours, "--beam", "2"]) == 0
    assert len(capsys.readouterr().out.strip().split("\n")) == len(SOURCES)
    assert main(["evaluate", ours, "--corpus", str(corpus), "--samples", "0"]) == 0
    assert "bleu" in json.loads(capsys.readouterr().out)
    tok = load_tokenizer(ours)  # the attention plot's labels
    pieces = [tok.id_to_piece(t) for t in tok.encode(SOURCES[1:2], eos=True)[0]]
    assert pieces == tok.pieces(SOURCES[1]) + ["</s>"]
    assert [tok.id_to_piece(t) for t in (PAD, BOS, 4)] == ["<pad>", "<pad>", "<mask>"]
