"""aiayn encoder-decoder out as Marian: transformers (and CTranslate2, when installed) load the
export unchanged and give our log-probabilities, greedy and beam outputs; import brings the
model back bit for bit."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aiayn import ModelConfig, build_model
from aiayn.data.tokenizer import BOS, PAD, Tokenizer
from aiayn.infer.beam import beam_decode
from aiayn.infer.greedy import greedy_decode
from aiayn.interop.hf import export_hf, import_hf
from aiayn.modeldir import load_model_dir, save_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.interop.hf_fixtures import ding_lines
from tests.tolerance import assert_close_to_scale

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

SOURCES = ["Das Haus ist groß.", "Er kam nicht.", "ein kleines Boot", "Zähne putzen!"]


@pytest.fixture(scope="module")
def spm_tokenizer():
    return Tokenizer.train(ding_lines("de", 400) + ding_lines("en", 400), 360)


def native(tmp_path, tokenizer, **overrides) -> Path:
    """A random aiayn model directory (weights x3 so outputs vary from step to step)."""
    config = ModelConfig.preset(
        "tiny", vocab_size=tokenizer.vocab_size, dropout=0.0, embedding_dropout=0.0, max_len=64
    ).replace(**overrides)
    torch.manual_seed(0)
    model = build_model(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
        if config.final_logits_bias:
            model.unembed.bias.normal_()
    directory = tmp_path / "ours"
    save_model_dir(directory, model)
    tokenizer.save(directory)
    assert model.tgt_embed.token.weight[BOS].abs().sum() > 0  # the start row is not zero
    return directory


def exported(tmp_path, tokenizer, **overrides):
    directory = native(tmp_path, tokenizer, **overrides)
    export_hf(directory, tmp_path / "hf")
    theirs = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    reference = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    return load_model_dir(directory), theirs, reference


def their_ids(ours: list[int], n: int) -> list[int]:
    """The export's layout: aiayn's ids shifted down by one, pad moved to the end."""
    return [n - 1 if t == PAD else t - 1 for t in ours]


OPTIONS = [
    {},
    {"activation": "swish", "embed_scale": False, "final_logits_bias": True},
    {"activation": "gelu", "tie_embeddings": "decoder"},
    {"tie_embeddings": "none", "d_model": 30, "n_heads": 3},
]


@pytest.mark.parametrize("overrides", OPTIONS)
def test_transformers_gives_our_log_probabilities(tmp_path, spm_tokenizer, overrides):
    model, theirs, _ = exported(tmp_path, spm_tokenizer, **overrides)
    n = spm_tokenizer.vocab_size
    g = torch.Generator().manual_seed(0)
    src, tgt = torch.randint(5, n, (3, 9), generator=g), torch.randint(5, n, (3, 7), generator=g)
    src[1, 5:], src[2, 2:], tgt[0, 4:], tgt[2, 6:] = PAD, PAD, PAD, PAD
    tgt[:, 0] = BOS
    to_theirs = lambda x: torch.tensor([their_ids(r, n) for r in x.tolist()])  # noqa: E731
    with torch.no_grad():
        ours = model(src, tgt).log_softmax(-1)
        ref = theirs(
            input_ids=to_theirs(src),
            attention_mask=(src != PAD).long(),
            decoder_input_ids=to_theirs(tgt),
            decoder_attention_mask=(tgt != PAD).long(),
        ).logits.log_softmax(-1)
    real = tgt != PAD
    order = torch.tensor(their_ids(list(range(n)), n))
    assert_close_to_scale(ref[real][:, order], ours[real])
    # the start row is zero, as CTranslate2 assumes for Marian
    assert not theirs.model.decoder.embed_tokens.weight[theirs.config.decoder_start_token_id].any()
    assert theirs.config.pad_token_id == n - 1  # the row CTranslate2 drops is our pad


def test_token_ids_equal_the_transformers_tokenizer(tmp_path, spm_tokenizer):
    _, _, reference = exported(tmp_path, spm_tokenizer)
    n = spm_tokenizer.vocab_size
    ours = spm_tokenizer.encode(SOURCES, eos=True)
    assert [their_ids(x, n) for x in ours] == reference(SOURCES)["input_ids"]
    decoded = reference.batch_decode([their_ids(x, n) for x in ours], skip_special_tokens=True)
    assert decoded == spm_tokenizer.decode(ours)


def test_greedy_and_beam_search_equal_generate(tmp_path, spm_tokenizer):
    model, theirs, reference = exported(tmp_path, spm_tokenizer)
    n, offset, produced = spm_tokenizer.vocab_size, 5, set()
    eos = theirs.config.eos_token_id
    for text in SOURCES:
        src = torch.tensor([spm_tokenizer.encode([text], eos=True)[0]])
        common = dict(
            max_new_tokens=src.size(1) + offset,
            do_sample=False,
            bad_words_ids=None,
            forced_eos_token_id=None,
        )
        hf_src = torch.tensor([their_ids(src[0].tolist(), n)])
        for beam in (1, 4):
            with torch.no_grad():
                ref = theirs.generate(hf_src, num_beams=beam, length_penalty=0.0, **common)
            ref = ref[0, 1:].tolist()
            ref = ref[: ref.index(eos) + 1] if eos in ref else ref
            if beam == 1:
                got = [
                    t
                    for t in greedy_decode(model, src, max_len_offset=offset)[0].tolist()
                    if t != PAD
                ]
            else:
                got = beam_decode(model, src, beam=4, alpha=0.0, max_len_offset=offset)[0][0].tokens
            assert their_ids(got, n) == ref
            produced.update(got)
    assert len(produced) > 3


def test_import_of_the_export_is_the_model_bit_for_bit(tmp_path, spm_tokenizer):
    model, _, _ = exported(tmp_path, spm_tokenizer, final_logits_bias=False)
    summary = import_hf(tmp_path / "hf", tmp_path / "back")
    assert summary["restored_exactly"]
    back = load_model_dir(tmp_path / "back")
    assert back.config == model.config
    a, b = model.state_dict(), back.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    tok = load_tokenizer(tmp_path / "back")
    assert tok.encode(SOURCES) == spm_tokenizer.encode(SOURCES)
    assert tok.decode(spm_tokenizer.encode(SOURCES)) == spm_tokenizer.decode(
        spm_tokenizer.encode(SOURCES)
    )
    # without aiayn.json (or after the weights changed) the export imports as it stands:
    # the same function, with the start row zero
    (tmp_path / "hf" / "aiayn.json").unlink()
    assert not import_hf(tmp_path / "hf", tmp_path / "plain")["restored_exactly"]
    plain = load_model_dir(tmp_path / "plain")
    src = torch.tensor(spm_tokenizer.encode(SOURCES[:1], eos=True))
    with torch.no_grad():
        assert_close_to_scale(
            plain(src, torch.tensor([[BOS, 7, 9]])).log_softmax(-1),
            model(src, torch.tensor([[BOS, 7, 9]])).log_softmax(-1),
        )
    assert greedy_decode(plain, src).tolist() == greedy_decode(model, src).tolist()


def test_options_without_a_marian_counterpart_are_named(tmp_path, spm_tokenizer):
    directory = native(tmp_path, spm_tokenizer, norm_first=True)
    with pytest.raises(ValueError, match="norm_first=True has no Marian counterpart"):
        export_hf(directory, tmp_path / "hf")


@pytest.mark.slow  # the converter starts transformers in a subprocess (~10 s); the shipped
# model's test runs it by default
@pytest.mark.skipif(
    shutil.which("ct2-transformers-converter") is None
    and not Path(sys.executable).with_name("ct2-transformers-converter").exists(),
    reason="CTranslate2 is not installed (pip install aiayn[bench])",
)
def test_ctranslate2_converts_the_export_and_translates_as_we_do(tmp_path, spm_tokenizer):
    ctranslate2 = pytest.importorskip("ctranslate2")
    model, theirs, reference = exported(tmp_path, spm_tokenizer)
    converter = shutil.which("ct2-transformers-converter") or str(
        Path(sys.executable).with_name("ct2-transformers-converter")
    )
    subprocess.run(
        [converter, "--model", str(tmp_path / "hf"), "--output_dir", str(tmp_path / "ct2")],
        check=True,
        capture_output=True,
    )
    translator = ctranslate2.Translator(
        str(tmp_path / "ct2"), device="cpu", inter_threads=1, intra_threads=1
    )
    offset = 5
    for beam in (1, 4):
        for text in SOURCES:
            src = spm_tokenizer.encode([text], eos=True)[0]
            tokens = reference.convert_ids_to_tokens(their_ids(src, spm_tokenizer.vocab_size))
            result = translator.translate_batch(
                [tokens],
                beam_size=beam,
                length_penalty=0.0,
                max_decoding_length=len(src) + offset,
                return_end_token=True,
            )[0].hypotheses[0]
            if beam == 1:
                got = [
                    t
                    for t in greedy_decode(model, torch.tensor([src]), max_len_offset=offset)[
                        0
                    ].tolist()
                    if t != PAD
                ]
            else:
                got = beam_decode(
                    model, torch.tensor([src]), beam=4, alpha=0.0, max_len_offset=offset
                )[0][0].tokens
            ours = reference.convert_ids_to_tokens(their_ids(got, spm_tokenizer.vocab_size))
            assert result == ours, (beam, text)
