"""GPT-2 in and out: logits, token ids, greedy and beam search equal transformers', and the
weights survive export(import(x)) bit for bit."""

import pytest
import torch
from safetensors.torch import load_file

from aiayn.data.tokenizer import BOS, EOS
from aiayn.infer.beam import beam_continue
from aiayn.infer.sampling import generate
from aiayn.interop.hf import export_hf, import_hf
from aiayn.modeldir import load_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.interop.hf_fixtures import byte_bpe_tokenizer, gpt2_model
from tests.tolerance import assert_close_to_scale

transformers = pytest.importorskip("transformers")

TEXTS = ["The cat sat on the mat.", "  naïve  café\t— 42", "zebra!\nnew line", ""]


def imported(tmp_path, **config):
    directory = tmp_path / "hf"
    reference = byte_bpe_tokenizer(directory)
    eos = reference.convert_tokens_to_ids("<|endoftext|>")
    theirs = gpt2_model(directory, len(reference), eos, **config)
    import_hf(directory, tmp_path / "ours")
    return theirs, reference, load_model_dir(tmp_path / "ours"), load_tokenizer(tmp_path / "ours")


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"activation_function": "gelu"},
        {"activation_function": "relu", "tie_word_embeddings": False},
        {"n_inner": 40, "layer_norm_epsilon": 1e-6},
    ],
)
def test_logits_equal_transformers_on_a_padded_batch(tmp_path, config):
    theirs, _, model, tok = imported(tmp_path, **config)
    assert model.config.norm_first and not model.config.embed_scale
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, theirs.config.vocab_size, (3, 11), generator=g)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 7:], mask[2, 2:] = False, False
    ours_ids = torch.tensor([tok.vocab_map.to_ours(r) for r in ids.tolist()])
    ours_ids[~mask] = 0
    with torch.no_grad():
        ref = theirs(input_ids=ids, attention_mask=mask.long()).logits  # (B, T, V_theirs)
        ours = model(ours_ids)  # (B, T, V_ours)
    src, _ = tok.vocab_map.index()
    real = src >= 0
    assert_close_to_scale(ours[mask][:, real], ref[mask][:, src[real]])
    assert torch.isneginf(ours[..., ~real]).all()  # the extra rows are never produced
    # the softmax over the real ids is theirs
    assert_close_to_scale(
        ours[mask].log_softmax(-1)[:, real], ref[mask].log_softmax(-1)[:, src[real]]
    )


def test_token_ids_and_text_round_trip(tmp_path):
    _, reference, _, tok = imported(tmp_path)
    ours = tok.encode(TEXTS)
    assert [tok.vocab_map.to_theirs(x) for x in ours] == reference(TEXTS)["input_ids"]
    assert tok.decode(ours) == TEXTS
    assert tok.decode([x + [EOS, 5, 6] for x in ours]) == TEXTS  # stops at eos
    assert tok.encode(["x"], bos=True)[0][0] == BOS and not tok.folds_case


def test_greedy_and_beam_search_equal_generate(tmp_path):
    theirs, reference, model, tok = imported(tmp_path)
    eos = theirs.config.eos_token_id
    for text in ("The cat", "A big red house stood"):
        prompt = reference(text, return_tensors="pt")["input_ids"]
        ours_prompt = torch.tensor([tok.vocab_map.to_ours(prompt[0].tolist())])
        with torch.no_grad():
            ref = theirs.generate(
                prompt, max_new_tokens=12, do_sample=False, num_beams=1, pad_token_id=eos
            )
        got = generate(model, ours_prompt, 12, temperature=0.0, eos_id=EOS)
        assert tok.vocab_map.to_theirs(got[0].tolist()) == ref[0].tolist()
        with torch.no_grad():
            ref = theirs.generate(
                prompt,
                max_new_tokens=12,
                do_sample=False,
                num_beams=4,
                length_penalty=0.0,
                early_stopping=False,
                pad_token_id=eos,
            )
        hyps = beam_continue(model, ours_prompt, beam=4, alpha=0.0, max_new_tokens=12)
        continuation = ref[0, prompt.size(1) :].tolist()
        if eos in continuation:
            continuation = continuation[: continuation.index(eos) + 1]
        assert tok.vocab_map.to_theirs(hyps[0][0].tokens) == continuation


def test_export_of_the_import_is_the_checkpoint_bit_for_bit(tmp_path):
    imported(tmp_path, tie_word_embeddings=False)
    export_hf(tmp_path / "ours", tmp_path / "back")
    original = load_file(tmp_path / "hf" / "model.safetensors")
    back = load_file(tmp_path / "back" / "model.safetensors")
    assert sorted(back) == sorted(original)
    for name, t in back.items():
        assert torch.equal(t, original[name]), name
    assert (
        transformers.AutoTokenizer.from_pretrained(tmp_path / "back")(TEXTS)["input_ids"]
        == (transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")(TEXTS)["input_ids"])
    )
    import_hf(tmp_path / "back", tmp_path / "again")
    a, b = (
        load_model_dir(tmp_path / "ours").state_dict(),
        load_model_dir(tmp_path / "again").state_dict(),
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_post_ln_decoder_has_no_gpt2_counterpart(tmp_path):
    from aiayn.modeldir import save_model_dir

    _, _, model, tok = imported(tmp_path)
    post_ln = type(model)(model.config.replace(norm_first=False))
    save_model_dir(tmp_path / "post", post_ln)
    tok.save(tmp_path / "post")
    with pytest.raises(ValueError, match="norm_first=False has no GPT-2 counterpart"):
        export_hf(tmp_path / "post", tmp_path / "out")


def test_an_aiayn_model_exported_as_gpt2_gives_its_logits_in_transformers(tmp_path):
    """The other way: weights trained in aiayn (here random) exported, loaded by transformers."""
    from aiayn import build_model
    from aiayn.modeldir import save_model_dir

    _, _, imported_model, tok = imported(tmp_path)
    torch.manual_seed(3)
    model = build_model(imported_model.config.replace(activation="relu")).eval()
    with torch.no_grad():
        model.unembed.bias.copy_(imported_model.unembed.bias)  # -inf on the extras only
    save_model_dir(tmp_path / "mine", model)
    tok.save(tmp_path / "mine")
    export_hf(tmp_path / "mine", tmp_path / "out")
    theirs = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "out").eval()
    assert theirs.config.activation_function == "relu"
    ids = torch.tensor([x[:5] for x in tok.encode(["The cat sat on the mat.", "A big red house"])])
    src, _ = tok.vocab_map.index()
    with torch.no_grad():
        ours = model(ids)
        ref = theirs(torch.tensor([tok.vocab_map.to_theirs(r) for r in ids.tolist()])).logits
    real = src >= 0
    assert_close_to_scale(ours[..., real], ref[..., src[real]])
