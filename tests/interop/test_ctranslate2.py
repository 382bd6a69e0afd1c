"""The ctranslate2 engine against the torch engine on the shipped model, its cache, int8 and
its errors.

CTranslate2's greedy search and its beam search at length penalty 0 are aiayn's: the same
tokens and (to float rounding) the same scores. At length penalty > 0 its beam stops by another
rule and normalises by |Y| ** alpha (rescored here with GNMT's penalty), so only the best
hypotheses on these sentences are compared there.
"""

import gzip
import json
import math
import shutil
import sys

import pytest
import torch

from aiayn.data.tokenizer import BOS, EOS
from aiayn.errors import UserError
from aiayn.infer.greedy import greedy_decode
from aiayn.infer.sampling import Sampling
from aiayn.infer.translate import search, translate
from aiayn.model import build_model
from aiayn.modeldir import ModelDir, load_model_and_tokenizer, save_model_dir
from tests.conftest import REPO_ROOT
from tests.tolerance import assert_close_to_scale

pytest.importorskip("ctranslate2", reason="CTranslate2 is not installed (aiayn[ctranslate2])")
pytest.importorskip("transformers", reason="CTranslate2's converter needs transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

from aiayn.interop.ctranslate2 import (  # noqa: E402
    CACHE_DIR,
    CTranslate2Engine,
    cache_key,
    cached_model,
    conversion_inputs,
)

MODEL = REPO_ROOT / "models" / "ding-de-en"
N = 40


@pytest.fixture(scope="module")
def shipped(shipped_copy):
    """(copy of the shipped model, torch model, tokenizer, float32 engine, test sentences)."""
    directory = shipped_copy
    model, tokenizer = load_model_and_tokenizer(directory)
    engine = CTranslate2Engine(directory, threads=1)
    lines = gzip.decompress((REPO_ROOT / "data/ding-de-en/test.de.gz").read_bytes())
    return directory, model, tokenizer, engine, lines.decode().splitlines()[:N]


def _sources(tokenizer, texts):
    return [x + [EOS] for x in tokenizer.encode(texts)]


def _torch_log_prob(model, source: list[int], tokens: list[int]) -> float:
    """log P(tokens | source) by teacher forcing."""
    with torch.no_grad():
        logits = model(torch.tensor([source]), torch.tensor([[BOS] + tokens[:-1]]))  # (1, T, V)
    log_probs = logits.float().log_softmax(-1)[0]  # (T, V)
    return float(log_probs[torch.arange(len(tokens)), torch.tensor(tokens)].sum())


def _scores(hyps) -> torch.Tensor:
    return torch.tensor([h[0].score for h in hyps], dtype=torch.float64)


def test_greedy_equals_the_torch_engine_tokens_and_log_probabilities(shipped):
    _, model, tokenizer, engine, texts = shipped
    ours = translate(model, tokenizer, texts)
    theirs = translate(engine, tokenizer, texts)
    assert [t[0][0] for t in theirs] == [t[0][0] for t in ours]
    assert len({t[0][0] for t in theirs}) > N // 2  # real, different translations
    sources = _sources(tokenizer, texts)
    hyps = engine.search(sources)
    want = [_torch_log_prob(model, s, h[0].tokens) for s, h in zip(sources, hyps, strict=True)]
    assert_close_to_scale(_scores(hyps), torch.tensor(want, dtype=torch.float64))
    assert all(h[0].score == h[0].log_prob for h in hyps)


SHORT = ["Hallo!", "Wo?", "Fahrradschloss", "Nein, danke."]  # some translate longer


@pytest.mark.parametrize("offset", [0, 1])
def test_greedy_stops_at_each_sentences_own_length_limit(shipped, offset):
    _, model, tokenizer, engine, texts = shipped
    sources = _sources(tokenizer, SHORT + texts[:8])
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in sources], batch_first=True)
    want = [[t for t in row if t != 0] for row in greedy_decode(model, src, offset).tolist()]
    hyps = engine.search(src, max_len_offset=offset)
    assert [h[0].tokens for h in hyps] == want
    assert any(w[-1] != EOS for w in want)  # some were cut at their limit
    expected = [_torch_log_prob(model, s, w) for s, w in zip(sources, want, strict=True)]
    assert_close_to_scale(_scores(hyps), torch.tensor(expected, dtype=torch.float64))


def test_unscored_greedy_gives_the_same_tokens_and_no_scores(shipped):
    """``scores=False`` (what the server asks for greedy requests): CTranslate2 is not asked
    for scores, the tokens (rows cut at their limit included) stay those of the scored search,
    and every score is NaN, as the torch engine gives."""
    _, model, tokenizer, engine, texts = shipped
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(s) for s in _sources(tokenizer, SHORT + texts[:8])], batch_first=True
    )
    scored = search(engine, src, max_len_offset=0)
    bare = search(engine, src, max_len_offset=0, scores=False)
    assert [h[0].tokens for h in bare] == [h[0].tokens for h in scored]
    assert all(math.isnan(h[0].score) and math.isnan(h[0].log_prob) for h in bare)
    torch_bare = search(model, src, max_len_offset=0, scores=False)
    assert [h[0].tokens for h in torch_bare] == [h[0].tokens for h in bare]
    assert all(math.isnan(h[0].score) for h in torch_bare)


def test_beam_at_length_penalty_0_equals_the_torch_engine(shipped):
    _, model, tokenizer, engine, texts = shipped
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(s) for s in _sources(tokenizer, texts)], batch_first=True
    )
    ours = search(model, src, beam=4, lenpen=0.0)
    theirs = search(engine, src, beam=4, lenpen=0.0)
    assert [h[0].tokens for h in theirs] == [h[0].tokens for h in ours]
    assert_close_to_scale(_scores(theirs), _scores(ours))


def test_beam_with_a_length_penalty_keeps_gnmt_scores(shipped):
    _, model, tokenizer, engine, texts = shipped
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(s) for s in _sources(tokenizer, texts[:20])], batch_first=True
    )
    ours = search(model, src, beam=4, lenpen=0.6)
    theirs = search(engine, src, beam=4, lenpen=0.6, nbest=3)
    assert [h[0].tokens for h in theirs] == [h[0].tokens for h in ours]  # on these sentences
    assert_close_to_scale(_scores(theirs), _scores(ours))
    for hyps in theirs:  # n-best, best first, each scored log P / ((5 + |Y|) / 6) ** 0.6
        assert len(hyps) == 3 and [h.score for h in hyps] == sorted(
            (h.score for h in hyps), reverse=True
        )
        for h in hyps:
            assert_close_to_scale(h.score, h.log_prob / ((5 + len(h.tokens)) / 6) ** 0.6, rel=1e-6)


def test_sampling_is_seeded_and_scored_under_the_model(shipped):
    _, model, tokenizer, engine, texts = shipped
    sources = _sources(tokenizer, texts[:4])
    options = dict(nbest=2, sampling=Sampling(temperature=1.5, top_k=20, seed=3))
    first, again = engine.search(sources, **options), engine.search(sources, **options)
    assert [[h.tokens for h in s] for s in first] == [[h.tokens for h in s] for s in again]
    other = engine.search(sources, nbest=2, sampling=Sampling(temperature=1.5, top_k=20, seed=4))
    assert [[h.tokens for h in s] for s in other] != [[h.tokens for h in s] for s in first]
    got = torch.tensor([h.score for s in first for h in s], dtype=torch.float64)
    pairs = zip(sources, first, strict=True)
    want = [_torch_log_prob(model, src, h.tokens) for src, s in pairs for h in s]
    assert_close_to_scale(got, torch.tensor(want, dtype=torch.float64))
    cold = engine.search(sources, sampling=Sampling(temperature=0.0))
    assert [h[0].tokens for h in cold] == [h[0].tokens for h in engine.search(sources)]


def test_int8_translates_through_ctranslate2s_int8(shipped):
    directory, model, tokenizer, _, texts = shipped
    engine = CTranslate2Engine(directory, quantize="int8", threads=1)
    assert engine.path.name.endswith("-int8")
    assert json.loads((engine.path / "aiayn.json").read_text())["quantization"] == "int8"
    out = [t[0][0] for t in translate(engine, tokenizer, texts[:10])]
    ours = [t[0][0] for t in translate(model, tokenizer, texts[:10])]
    assert all(out) and sum(a == b for a, b in zip(out, ours, strict=True)) >= 5


def _tiny_translator(directory, seed: int, tokenizer):
    from aiayn import ModelConfig

    config = ModelConfig.preset("tiny", vocab_size=tokenizer.vocab_size, max_len=64)
    torch.manual_seed(seed)
    save_model_dir(directory, build_model(config).eval())
    tokenizer.save(directory)


def test_the_conversion_is_cached_and_redone_when_the_weights_change(shipped, tmp_path):
    _, _, tokenizer, _, _ = shipped
    directory = tmp_path / "tiny"
    _tiny_translator(directory, 0, tokenizer)
    first = cached_model(directory)
    assert first == directory / CACHE_DIR / cache_key(conversion_inputs(directory, None))
    stamp = (first / "model.bin").stat().st_mtime_ns
    assert cached_model(directory) == first
    assert (first / "model.bin").stat().st_mtime_ns == stamp  # reused, not converted again
    _tiny_translator(directory, 1, tokenizer)  # new weights in the same directory
    second = cached_model(directory)
    assert second != first and not first.exists()
    assert (second / "model.bin").read_bytes() != b""
    assert (
        json.loads((second / "aiayn.json").read_text())["weights_sha256"]
        == ModelDir(directory).weights_sha256()
    )
    int8 = cached_model(directory, "int8")
    assert int8 != second and second.exists()  # one conversion per quantization


def test_replaced_weights_that_config_does_not_record_are_an_error(shipped, tmp_path):
    _, _, tokenizer, _, _ = shipped
    directory = tmp_path / "tiny"
    _tiny_translator(directory, 0, tokenizer)
    other = tmp_path / "other"
    _tiny_translator(other, 1, tokenizer)
    shutil.copy(other / "model.safetensors", directory / "model.safetensors")
    with pytest.raises(UserError, match="damaged or were replaced"):
        cached_model(directory)


def test_bad_options_are_named(shipped, tmp_path):
    directory, _, tokenizer, engine, texts = shipped
    sources = _sources(tokenizer, texts[:2])
    with pytest.raises(UserError, match="'coverage_penalty' has no CTranslate2 counterpart"):
        engine.search(sources, coverage_penalty=0.2)
    with pytest.raises(ValueError, match="beam must be 1"):
        engine.search(sources, beam=2, sampling=Sampling())
    with pytest.raises(ValueError, match="nbest .3. cannot exceed the beam size .2."):
        engine.search(sources, beam=2, nbest=3)
    with pytest.raises(ValueError, match="early_stop is for beam search"):
        engine.search(sources, early_stop=True, sampling=Sampling())
    with pytest.raises(UserError, match="quantization 'fp16' has no CTranslate2 counterpart"):
        CTranslate2Engine(directory, quantize="fp16")
    from aiayn import ModelConfig

    lm = tmp_path / "lm"
    config = ModelConfig.preset("tiny", family="decoder-only", vocab_size=tokenizer.vocab_size)
    save_model_dir(lm, build_model(config))
    tokenizer.save(lm)
    with pytest.raises(UserError, match="decoder-only model; the CTranslate2 engine"):
        CTranslate2Engine(lm)


def test_without_ctranslate2_the_error_says_how_to_install_it(shipped, monkeypatch):
    directory = shipped[0]
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import fails
    with pytest.raises(UserError, match=r"pip install 'aiayn\[ctranslate2\]'"):
        CTranslate2Engine(directory)


class _WithoutCuBLAS:
    """A ctranslate2.Translator on a GPU whose CTranslate2 was built for another CUDA: it
    loads (the driver finds the GPU) and fails at its first search, as CTranslate2 4.8's
    wheel did beside torch's CUDA 13 libraries on an H200."""

    def __init__(self, **options):
        self.options = options

    def translate_batch(self, *args, **kwargs):
        raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")


def _on_a_gpu_without_cublas(monkeypatch) -> None:
    from aiayn.interop.ctranslate2 import engine

    monkeypatch.setattr(engine, "_device", lambda device: ("cuda", 0))
    monkeypatch.setattr(CTranslate2Engine, "_translator", lambda self, **o: _WithoutCuBLAS(**o))


def test_a_ctranslate2_that_cannot_decode_on_the_gpu_fails_when_the_model_loads(
    shipped, monkeypatch
):
    _on_a_gpu_without_cublas(monkeypatch)
    with pytest.raises(UserError, match="cannot decode on cuda") as error:
        CTranslate2Engine(shipped[0], device="cuda")
    assert "libcublas.so.12" in str(error.value)
    assert "use device cpu, or engine torch" in str(error.value)


def test_under_auto_the_torch_model_decodes_where_ctranslate2_cannot(shipped, monkeypatch):
    """Before, every request failed (the server answered 500 to each); now the model's first
    translation finds it out, says so once, and aiayn's model decodes that one and the rest."""
    import aiayn

    directory = shipped[0]
    sentences = shipped[4][:8]
    want = [t.text for t in aiayn.load(directory, engine="torch").translate(sentences)]
    auto = aiayn.load(directory)  # engine "auto": CTranslate2 built at the first translation
    _on_a_gpu_without_cublas(monkeypatch)
    with pytest.warns(UserWarning, match="engine auto: .*cannot decode on cuda.*libcublas"):
        got = auto.translate(sentences, scores=False)
    assert [t.text for t in got] == want
    assert auto.engines == {"greedy": "torch", "beam": "torch", "other": "torch"}
    beam = auto.translate(sentences, beam=4, scores=False)
    torch_beam = aiayn.load(directory, engine="torch").translate(sentences, beam=4, scores=False)
    assert [t.text for t in beam] == [t.text for t in torch_beam]


def test_under_auto_a_cache_it_cannot_write_is_said_and_the_torch_model_decodes(shipped, tmp_path):
    """Where no conversion can be written (a cache under a file: root too cannot make it),
    engine auto decodes with aiayn's model and says why, once."""
    import aiayn

    directory, sentences = shipped[0], shipped[4][:4]
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    auto = aiayn.load(directory, cache_dir=blocker / "cache")
    with pytest.warns(UserWarning, match="engine auto: .*cannot write the CTranslate2 conversion"):
        got = auto.translate(sentences, scores=False)
    want = aiayn.load(directory, engine="torch").translate(sentences, scores=False)
    assert [t.text for t in got] == [t.text for t in want] and auto.engine == "torch"


class _Recorded:
    """A translator whose translate_batch records which it is (and may hold the call)."""

    def __init__(self, inner, name, log, hold=None):
        self.inner, self.name, self.log, self.hold = inner, name, log, hold

    def translate_batch(self, *args, **kwargs):
        self.log.append(self.name)
        if self.hold is not None:
            self.hold[0].set()  # inside the call
            assert self.hold[1].wait(10)
        return self.inner.translate_batch(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_with_two_decoders_a_lone_search_takes_every_thread_and_overlapping_ones_a_decoder(
    shipped, monkeypatch
):
    """decoders=2: two CTranslate2 decoders sharing the weights, and a translator of every
    thread for a search that has not overlapped another for ALONE_AFTER seconds; the
    answers are those of one decoder."""
    import threading

    from aiayn.interop.ctranslate2 import engine as engine_module

    directory, _, tokenizer, one, lines = shipped
    engine = CTranslate2Engine(directory, threads=1, decoders=2)
    assert engine.translator.num_translators == 2 and engine._alone.num_translators == 1
    assert one._alone is None  # one decoder: no second copy of the weights
    src = _sources(tokenizer, lines[:4])
    expected = one.search(src, beam=4)

    def same(got) -> bool:  # one decoder's hypotheses; scores summed on other threads
        assert [[h.tokens for h in hyps] for hyps in got] == [
            [h.tokens for h in hyps] for hyps in expected
        ]
        scores = [h.score for hyps in expected for h in hyps]
        assert_close_to_scale([h.score for hyps in got for h in hyps], scores, rel=1e-5)
        return True

    monkeypatch.setattr(engine_module, "ALONE_AFTER", 3600.0)  # "of late": this test's time
    log: list[str] = []
    engine._alone = _Recorded(engine._alone, "alone", log)
    engine.translator = _Recorded(engine.translator, "decoder", log)
    engine._overlapped = float("-inf")
    assert same(engine.search(src, beam=4)) and log == ["alone"]  # nothing else under way

    first_in, second_in, release = threading.Event(), threading.Event(), threading.Event()
    engine._alone.hold = (first_in, release)  # the first search waits inside its call
    engine.translator.hold = (second_in, release)  # and so does the second
    answers = {}

    def search(name):
        answers[name] = engine.search(src, beam=4)

    first = threading.Thread(target=search, args=("first",))
    first.start()
    assert first_in.wait(10)
    second = threading.Thread(target=search, args=("second",))
    second.start()
    assert second_in.wait(10)  # it began beside the first: on a decoder
    release.set()
    first.join(10)
    second.join(10)
    assert same(answers["first"]) and same(answers["second"])
    assert log == ["alone", "alone", "decoder"]
    engine._alone.hold = engine.translator.hold = None
    assert same(engine.search(src, beam=4)) and log[-1] == "decoder"  # overlapped of late
    engine._overlapped -= 2 * engine_module.ALONE_AFTER  # long without overlap
    assert same(engine.search(src, beam=4)) and log[-1] == "alone"


def test_seeded_samples_repeat_with_two_decoders(shipped):
    """A seeded sample runs on a translator of one decoder: sentences of several lengths
    (a call each) draw the same samples call after call."""
    directory, _, tokenizer, _, lines = shipped
    engine = CTranslate2Engine(directory, threads=1, decoders=2)
    src = _sources(tokenizer, lines[:12])
    assert len({len(x) for x in src}) > 4  # several length groups
    sampling = Sampling(temperature=1.0, seed=123)
    draws = [
        [[h.tokens for h in hyps] for hyps in engine.search(src, sampling=sampling)]
        for _ in range(4)
    ]
    assert all(d == draws[0] for d in draws)
