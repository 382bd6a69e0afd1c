"""``aiayn.load``: each family's object gives what the functions it wraps give; scores are
log-probabilities; bad options are the command line's errors."""

import math

import pytest
import torch

import aiayn
from aiayn.api import load_for
from aiayn.data.batching import pad
from aiayn.errors import OptionError, UserError
from aiayn.infer.beam import beam_decode
from aiayn.infer.classify import classify_texts
from aiayn.infer.embed import embed_texts
from aiayn.infer.greedy import greedy_decode
from aiayn.infer.sampling import generate, row_generators, sample_decode
from aiayn.modeldir import load_model_and_tokenizer
from tests.tolerance import assert_close_to_scale

SENTENCES = ["Guten Morgen.", "Wie geht es dir heute?", "Das Haus ist groß.", "Ja"]


@pytest.fixture(scope="module")
def translator(model_dirs):
    return aiayn.load(model_dirs["translator"])


def _sources(tr, texts):
    ids = [x + [tr.config.eos_id] for x in tr.tokenizer.encode(texts)]
    return pad(ids)


def teacher_forced_log_prob(model, src_ids: list[int], tgt_ids: list[int]) -> float:
    """log P(tgt | src), one token at a time from the full forward pass (no cache)."""
    bos = model.config.bos_id
    with torch.no_grad():
        logits = model(torch.tensor([src_ids]), torch.tensor([[bos] + tgt_ids[:-1]]))  # (1, T, V)
    log_probs = torch.log_softmax(logits[0].double(), -1)  # (T, V)
    return float(sum(log_probs[t, tok] for t, tok in enumerate(tgt_ids)))


def test_load_picks_the_family_object(model_dirs):
    assert isinstance(aiayn.load(model_dirs["translator"]), aiayn.Translator)
    assert isinstance(aiayn.load(model_dirs["lm"]), aiayn.Generator)
    clf = aiayn.load(model_dirs["classifier"])
    assert isinstance(clf, aiayn.Classifier) and isinstance(clf, aiayn.Encoder)
    assert clf.labels == ["neg", "neutral", "pos"]


def test_greedy_translation_is_greedy_decode_with_its_log_probability(translator):
    src = _sources(translator, SENTENCES)
    want = greedy_decode(translator.model, src).tolist()
    got = translator.translate(SENTENCES)
    for row, t, src_row in zip(want, got, src.tolist(), strict=True):
        tokens = [x for x in row if x != translator.config.pad_id]
        assert list(t.tokens) == tokens and len(t.hypotheses) == 1
        assert t.text == translator.tokenizer.decode([tokens])[0]
        source = [x for x in src_row if x != translator.config.pad_id]
        want_lp = teacher_forced_log_prob(translator.model, source, tokens)
        assert t.score == t.log_prob
        assert_close_to_scale(torch.tensor(t.score), torch.tensor(want_lp))


def test_unscored_greedy_translations_are_the_same_texts(translator):
    scored = translator.translate(SENTENCES)
    bare = translator.translate(SENTENCES, scores=False)
    assert [t.tokens for t in bare] == [t.tokens for t in scored]
    assert [t.text for t in bare] == [t.text for t in scored]
    assert all(math.isnan(t.score) for t in bare) and not any(math.isnan(t.score) for t in scored)
    beam = translator.translate(SENTENCES, beam=3, scores=False)  # beam search always ranks
    ranked = translator.translate(SENTENCES, beam=3)
    assert [t.text for t in beam] == [t.text for t in ranked]
    # unscored, engine "auto" has CTranslate2 search it: its scores, to their fourth digit
    assert not any(math.isnan(t.score) for t in beam)
    assert_close_to_scale([t.score for t in beam], [t.score for t in ranked], rel=1e-3)


def test_beam_translation_is_beam_decode(translator):
    src = _sources(translator, SENTENCES)
    want = beam_decode(translator.model, src, beam=3, alpha=1.0, nbest=2)
    got = translator.translate(SENTENCES, beam=3, nbest=2, lenpen=1.0)
    for hyps, t in zip(want, got, strict=True):
        assert [list(h.tokens) for h in t.hypotheses] == [h.tokens for h in hyps]
        assert_close_to_scale([h.score for h in t.hypotheses], [h.score for h in hyps], rel=1e-6)
        ranked = [h.score for h in t.hypotheses]
        assert ranked == sorted(ranked, reverse=True) and t.score == max(ranked)  # best first
        for h in t.hypotheses:  # score = log P / lp(|Y|), Wu et al. 2016
            assert_close_to_scale(h.score, h.log_prob / ((5 + len(h.tokens)) / 6), rel=1e-9)


def test_sampled_translation_is_sample_decode(translator):
    sampling = aiayn.Sampling(temperature=1.3, top_p=0.9, seed=5)
    src = _sources(translator, SENTENCES)
    generators = row_generators(5, range(len(SENTENCES)), 3)
    want = sample_decode(translator.model, src, 1.3, None, 0.9, generators, 3)
    got = translator.translate(SENTENCES, nbest=3, sampling=sampling)
    for hyps, t in zip(want, got, strict=True):
        assert [list(h.tokens) for h in t.hypotheses] == [h.tokens for h in hyps]
    again = translator.translate(SENTENCES[2:], nbest=3, sampling=sampling, first_index=2)
    tokens = [[h.tokens for h in t.hypotheses] for t in again]
    assert tokens == [[h.tokens for h in t.hypotheses] for t in got[2:]]  # batch-independent


def test_temperatures_past_float32s_reach_decode_as_their_limits(translator, model_dirs):
    """Float32 logits divided by a temperature below 2**-100 overflow: it is greedy; past
    2**100 every token is equally likely already (and -inf / inf is NaN): it is 2**100."""

    short = dict(max_len_offset=6)

    def samples(temperature):
        sampling = aiayn.Sampling(temperature=temperature, seed=5)
        out = translator.translate(SENTENCES[:2], nbest=2, sampling=sampling, **short)
        return [[h.tokens for h in t.hypotheses] for t in out]

    greedy = [t.hypotheses[0].tokens for t in translator.translate(SENTENCES[:2], **short)]
    for temperature in (1e-300, 2.0**-101):
        assert samples(temperature) == [[g, g] for g in greedy], temperature
    assert samples(1e300) == samples(2.0**100) == samples(1e38)
    gen = aiayn.load(model_dirs["lm"])
    texts = {
        t: gen.generate(["the"], max_new_tokens=12, sampling=aiayn.Sampling(temperature=t))[0].text
        for t in (0.0, 1e-300, 1e-40, 2.0**100, 1e300)
    }
    assert texts[1e-300] == texts[1e-40] == texts[0.0] and texts[1e300] == texts[2.0**100]


def test_score_is_the_teacher_forced_log_probability(translator):
    targets = ["Good morning.", "How are you today?", "The house is big.", ""]
    got = translator.score(SENTENCES, targets)
    src = _sources(translator, SENTENCES).tolist()
    tgt = translator.tokenizer.encode_target(targets)
    for score, s, t in zip(got, src, tgt, strict=True):
        source = [x for x in s if x != translator.config.pad_id]
        want = teacher_forced_log_prob(translator.model, source, t + [translator.config.eos_id])
        assert_close_to_scale(torch.tensor(score), torch.tensor(want))
    assert got[0] != got[1]  # really per pair
    one = translator.score(SENTENCES[1:2], targets[1:2])[0]
    assert_close_to_scale(torch.tensor(one), torch.tensor(got[1]))  # padding does not count


def test_attention_is_over_the_translation(translator):
    att = translator.attention(SENTENCES[1], beam=2)
    assert att.translation == translator.translate(SENTENCES[1:2], beam=2)[0].text
    assert len(att.cross) == translator.config.n_decoder_layers


def test_generator_is_generate(model_dirs):
    gen = aiayn.load(model_dirs["lm"])
    model, tokenizer = load_model_and_tokenizer(model_dirs["lm"])
    prompt = tokenizer.encode(["the quick"])[0]
    want = generate(model, torch.tensor([prompt]), 20, 0.9, 10, seed=7, eos_id=None, context=32)
    sampling = aiayn.Sampling(temperature=0.9, top_k=10, seed=7)
    (out,) = gen.generate(["the quick"], max_new_tokens=20, sampling=sampling, stop_at_eos=False)
    assert list(out.tokens) == want[0, len(prompt) :].tolist()
    assert out.full_text == tokenizer.decode([want[0].tolist()])[0]
    assert out.prompt_tokens == len(prompt) and out.finish_reason == "length"
    stream = gen.stream("the quick", max_new_tokens=20, sampling=sampling, stop_at_eos=False)
    pieces = list(stream) + [stream.finish()]
    assert "".join(pieces) == stream.text == out.text and stream.finish_reason == "length"


def test_a_stream_stopped_early_is_cancelled(model_dirs):
    gen = aiayn.load(model_dirs["lm"])
    stream = gen.stream("the", max_new_tokens=50, sampling=aiayn.Sampling(temperature=0))
    next(iter(stream))
    stream.finish()
    assert stream.finish_reason == "cancelled" and len(stream.tokens) == 1


def test_a_stop_string_ends_the_continuation_before_it(model_dirs):
    gen = aiayn.load(model_dirs["lm"])
    greedy = aiayn.Sampling(temperature=0)
    whole = gen.generate(["the"], max_new_tokens=30, sampling=greedy, stop_at_eos=False)[0]
    stop = whole.text[5:7]  # two characters met after the fifth
    at = whole.text.find(stop)
    out = gen.generate(["the"], max_new_tokens=30, sampling=greedy, stop_at_eos=False, stop=stop)
    assert out[0].text == whole.text[:at] and out[0].finish_reason == "stop"
    assert out[0].full_text == "the" + whole.text[:at]
    stream = gen.stream("the", max_new_tokens=30, sampling=greedy, stop_at_eos=False, stop=[stop])
    pieces = list(stream) + [stream.finish()]
    assert "".join(pieces) == whole.text[:at] and stream.finish_reason == "stop"
    never = gen.generate(["the"], max_new_tokens=30, sampling=greedy, stop_at_eos=False, stop="§§")
    assert never[0].text == whole.text and never[0].finish_reason == "length"
    with pytest.raises(OptionError, match="stop"):
        gen.stream("the", stop=[""])


def test_embeddings_of_token_ids_are_those_of_their_texts(model_dirs):
    enc = aiayn.load(model_dirs["classifier"])
    ids = enc.tokenizer.encode(SENTENCES)
    assert torch.equal(enc.embed_ids(ids, normalize=True), enc.embed(SENTENCES, normalize=True))
    for bad in ([[]], [[enc.config.vocab_size]], [[-1]], [[1] * enc.max_text_tokens + [1]]):
        with pytest.raises(OptionError, match=r"ids\[0\]"):
            enc.embed_ids(bad)


def test_classifier_and_encoder_are_the_library_functions(model_dirs):
    clf = aiayn.load(model_dirs["classifier"])
    model, tokenizer = load_model_and_tokenizer(model_dirs["classifier"])
    probs = classify_texts(model, tokenizer, SENTENCES)
    assert torch.equal(clf.probabilities(SENTENCES), probs)
    results = clf.classify(SENTENCES)
    for r, row in zip(results, probs, strict=True):
        assert r.label == clf.labels[int(row.argmax())]
        assert list(r.probabilities.values()) == row.tolist() and r.score == row.max().item()
    assert torch.equal(
        clf.embed(SENTENCES, normalize=True), embed_texts(model, tokenizer, SENTENCES, True)
    )
    enc = load_for("embed", model_dirs["classifier"])
    assert type(enc) is aiayn.Encoder
    assert torch.equal(enc.embed(SENTENCES), embed_texts(model, tokenizer, SENTENCES))


@pytest.mark.parametrize(
    "options, message, flags",
    [
        (dict(beam=2, nbest=3), "nbest (3) cannot exceed beam (2)", "--nbest (3) cannot exceed --beam (2)"),
        (dict(beam=4, sampling=aiayn.Sampling()), "sampling draws one token at a time: use it without beam (4)",
         "--sample draws one token at a time: use it without --beam (4)"),
        (dict(early_stop=True, sampling=aiayn.Sampling()), "early_stop is for beam search",
         "--early-stop is for beam search: use it without --sample"),
        (dict(beam=0), "beam must be an integer >= 1", "--beam must be"),
        (dict(nbest=0), "nbest must be an integer >= 1", "--nbest must be"),
        (dict(lenpen=float("nan")), "lenpen must be a finite number >= 0", "--lenpen must be"),
        (dict(max_len_offset=-1), "max_len_offset must be an integer >= 0", "--max-len-offset"),
        (dict(sampling=0.5), "sampling must be an aiayn.Sampling", "--sample must be"),
    ],
)  # fmt: skip
def test_bad_options_are_option_errors_the_command_line_names_by_flag(
    translator, options, message, flags
):
    with pytest.raises(OptionError) as caught:
        translator.translate(["Ja"], **options)
    assert message in str(caught.value) and isinstance(caught.value, UserError)
    assert flags in caught.value.renamed({"sampling": "--sample"})


@pytest.mark.parametrize(
    "fields, name",
    [
        (dict(temperature=-1.0), "temperature"),
        (dict(temperature=float("inf")), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_sampling_settings_name_the_field(fields, name):
    with pytest.raises(OptionError, match=name) as caught:
        aiayn.Sampling(**fields)
    assert caught.value.options == (name,)


def test_a_text_for_a_list_of_texts_is_refused(translator):
    with pytest.raises(OptionError, match="texts must be a list of strings"):
        translator.translate("Guten Morgen.")
    with pytest.raises(OptionError, match="one target per source"):
        translator.score(["a", "b"], ["x"])


def test_the_wrong_family_names_what_the_directory_fits(model_dirs):
    with pytest.raises(UserError, match="decoder-only family; translate needs an encoder-decoder"):
        load_for("translate", model_dirs["lm"])
    with pytest.raises(UserError, match="no text classifier but a model of the decoder-only"):
        load_for("classify", model_dirs["lm"])
    with pytest.raises(UserError, match="engine 'onnx'"):
        aiayn.load(model_dirs["lm"], engine="onnx")


def test_the_length_limit_comes_from_the_config(tiny):
    learned = tiny.replace(pos_encoding="learned", max_len=16)
    assert learned.max_positions == 16 and learned.clamp_length(40) == 16
    assert learned.clamp_length(torch.tensor([3, 40])).tolist() == [3, 16]
    assert tiny.max_positions is None and tiny.clamp_length(4000) == 4000
    assert (tiny.pad_id, tiny.bos_id, tiny.eos_id) == (0, 2, 3)
