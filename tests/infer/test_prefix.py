"""Target prefixes: a translation that must begin with given target tokens, for greedy, beam
and sampling, through the API, the command line, the server and the ctranslate2 engine, on the
shipped model.

The prefix is read in one teacher-forced pass and the search goes on from its end, so a prefix
that is the beginning of the unconstrained best leaves greedy search where it was; hypotheses
hold the prefix and are scored over the whole target (the teacher-forced log-probability)."""

import gzip
import io

import pytest
import torch

import aiayn
from aiayn.cli import main
from aiayn.data.tokenizer import BOS
from aiayn.errors import UserError
from aiayn.infer.beam import beam_decode
from aiayn.infer.greedy import greedy_search
from aiayn.infer.sampling import Sampling
from aiayn.infer.translate import search, source_ids
from tests.conftest import REPO_ROOT
from tests.tolerance import assert_close_to_scale

N = 24


@pytest.fixture(scope="module")
def shipped(shipped_copy):
    translator = aiayn.load(shipped_copy)
    lines = gzip.decompress((REPO_ROOT / "data/ding-de-en/test.de.gz").read_bytes())
    texts = lines.decode().splitlines()[:N]
    ids, _ = source_ids(translator.model, translator.tokenizer, texts)
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(x) for x in ids], batch_first=True)
    return translator, texts, src


def teacher_forced(model, src_row: torch.Tensor, tokens: list[int]) -> float:
    """log P(tokens | source) by one forward pass."""
    with torch.no_grad():
        logits = model(src_row[None], torch.tensor([[BOS] + tokens[:-1]]))[0].float()
    return float(logits.log_softmax(-1)[torch.arange(len(tokens)), torch.tensor(tokens)].sum())


def test_greedy_from_the_start_of_its_own_output_is_the_same_search(shipped):
    tr, _, src = shipped
    free, free_lp = greedy_search(tr.model, src)
    prefix = free[:, :3]
    got, got_lp = greedy_search(tr.model, src, prefix=prefix)
    assert torch.equal(got, free[:, : got.size(1)]) and got.size(1) == free.size(1)
    assert_close_to_scale(got_lp, free_lp, 1e-5)


def test_a_greedy_output_with_a_prefix_is_scored_over_the_whole_target(shipped):
    tr, _, src = shipped
    prefix = torch.tensor([[5, 6]] * src.size(0))  # tokens the model would not choose
    out, log_prob = greedy_search(tr.model, src, prefix=prefix)
    assert torch.equal(out[:, :2], prefix)
    for row in range(4):
        tokens = [t for t in out[row].tolist() if t != tr.config.pad_id]
        assert_close_to_scale(log_prob[row], teacher_forced(tr.model, src[row], tokens), 1e-5)


def test_beam_1_with_a_prefix_is_greedy_search_with_it(shipped):
    tr, _, src = shipped
    prefix = torch.tensor([[5, 6, 7]] * src.size(0))
    out, log_prob = greedy_search(tr.model, src, prefix=prefix)
    beams = beam_decode(tr.model, src, beam=1, alpha=0.0, prefix=prefix)
    for row, hyps in enumerate(beams):
        assert hyps[0].tokens == [t for t in out[row].tolist() if t != tr.config.pad_id]
        assert_close_to_scale(hyps[0].log_prob, log_prob[row], 1e-5)


def test_beam_from_the_start_of_its_best_finds_it_or_a_better_one(shipped):
    tr, _, src = shipped
    free = beam_decode(tr.model, src, beam=4)
    prefix = torch.tensor([h[0].tokens[:2] for h in free if len(h[0].tokens) >= 2][:8])
    rows = [i for i, h in enumerate(free) if len(h[0].tokens) >= 2][:8]
    got = beam_decode(tr.model, src[rows], beam=4, prefix=prefix)
    same = 0
    for i, hyps in zip(rows, got, strict=True):
        best = hyps[0]
        assert best.tokens[:2] == free[i][0].tokens[:2]
        if best.tokens == free[i][0].tokens:
            same += 1
            assert_close_to_scale(best.score, free[i][0].score, 1e-5)
        else:  # the constrained search, seeded past the prefix, found a better hypothesis
            assert best.score > free[i][0].score
        assert_close_to_scale(best.log_prob, teacher_forced(tr.model, src[i], best.tokens), 1e-5)
    assert same >= len(rows) // 2


def test_samples_begin_with_the_prefix_and_are_reproducible(shipped):
    tr, texts, _ = shipped
    sampling = Sampling(temperature=0.8, seed=3)
    first = tr.translate(texts[:4], prefix=["The"] * 4, sampling=sampling, nbest=2)
    again = tr.translate(texts[:4], prefix=["The"] * 4, sampling=sampling, nbest=2)
    assert [t.text for t in first] == [t.text for t in again]
    assert all(h.text.startswith("The") for t in first for h in t.hypotheses)
    for text, t in zip(texts[:4], first, strict=True):  # scored over the whole target
        assert_close_to_scale(t.best.log_prob, tr.score([text], [t.best.text])[0], 1e-4)


def test_a_batch_of_mixed_prefixes_equals_each_alone(shipped):
    tr, texts, _ = shipped
    heads = ["The", "", "I think", "", "This is", "We"]
    for options in ({}, {"beam": 3}):
        together = tr.translate(texts[:6], prefix=heads, **options)
        alone = [
            tr.translate([t], prefix=[h], **options)[0]
            for t, h in zip(texts[:6], heads, strict=True)
        ]
        assert [t.text for t in together] == [t.text for t in alone]
        assert_close_to_scale([t.score for t in together], [t.score for t in alone], 1e-5)
        assert all(t.text.startswith(h) for t, h in zip(together, heads, strict=True))


def test_bad_prefixes_are_named(shipped):
    tr, texts, _ = shipped
    with pytest.raises(ValueError, match="prefix: 1 prefixes for 2 texts"):
        tr.translate(texts[:2], prefix=["only one"])
    with pytest.raises(ValueError, match="prefix must be a list of strings"):
        tr.translate(texts[:1], prefix="The")


def test_a_prefix_past_a_learned_position_table_is_refused(tmp_path, shipped):
    from aiayn import ModelConfig
    from aiayn.model import build_model
    from aiayn.modeldir import save_model_dir

    tr = shipped[0]
    config = ModelConfig.preset("tiny", vocab_size=tr.tokenizer.vocab_size, max_len=8)
    save_model_dir(tmp_path / "m", build_model(config.replace(pos_encoding="learned")).eval())
    tr.tokenizer.save(tmp_path / "m")
    small = aiayn.load(tmp_path / "m")
    with pytest.raises(UserError, match="prefix 1: .* tokens; the model has 8 target positions"):
        small.translate(["Hallo"], prefix=["one two three four five six seven eight nine"])


def test_the_ctranslate2_engine_continues_the_prefix_as_the_torch_engine(shipped):
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    tr, texts, src = shipped
    engine = aiayn.load(tr.path, engine="ctranslate2")
    heads = ["The", "", "I", "This is"] * 2
    ours = tr.translate(texts[:8], prefix=heads)
    theirs = engine.translate(texts[:8], prefix=heads)
    assert [t.best.tokens for t in theirs] == [t.best.tokens for t in ours]
    assert_close_to_scale([t.score for t in theirs], [t.score for t in ours], 1e-4)
    prefix = torch.tensor([[5, 6]] * 4)
    ours = search(tr.model, src[:4], beam=4, prefix=prefix)
    theirs = engine.decoder.search(src[:4], beam=4, prefix=prefix)
    for row, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert a[0].tokens[:2] == b[0].tokens[:2] == [5, 6]
        # CTranslate2's beam is not aiayn's exact search, but its hypotheses are scored by
        # the model over the whole target, prefix included
        want = teacher_forced(tr.model, src[row], b[0].tokens)
        assert_close_to_scale(b[0].log_prob, want, 1e-4)


def test_the_command_line_reads_a_prefix_file(shipped, tmp_path, monkeypatch, capsys):
    tr, texts, _ = shipped
    prefixes = tmp_path / "prefixes.txt"
    prefixes.write_text("This is\n\nWe\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(texts[:3]) + "\n"))
    assert main(["translate", str(tr.path), "--prefix-file", str(prefixes)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [t.text for t in tr.translate(texts[:3], prefix=["This is", "", "We"])]
    assert out[0].startswith("This is") and out[2].startswith("We")
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(texts[:4]) + "\n"))
    assert main(["translate", str(tr.path), "--prefix-file", str(prefixes)]) == 2
    assert "--prefix-file" in capsys.readouterr().err
    prefixes.write_text("a\nb\nc\nd\ne\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(texts[:4]) + "\n"))
    assert main(["translate", str(tr.path), "--prefix-file", str(prefixes)]) == 2
    assert "more lines than stdin's 4" in capsys.readouterr().err


def test_the_server_takes_a_prefix_on_both_routes(shipped):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx2")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec
    from tests.serve.conftest import wait_ready

    tr, texts, _ = shipped
    spec = ModelSpec(tr.path, "ding", languages=("de", "en"))
    with TestClient(create_app([spec], ServeConfig())) as client:
        wait_ready(client)
        r = client.post("/v1/translate", json={"text": texts[:2], "prefix": "The", "beam": 2})
        got = [t["text"] for t in r.json()["translations"]]
        assert got == [t.text for t in tr.translate(texts[:2], prefix=["The"] * 2, beam=2)]
        r = client.post(
            "/translate", json={"q": texts[0], "source": "de", "target": "en", "prefix": "We"}
        )
        assert r.status_code == 200 and r.json()["translatedText"].startswith("We")
        r = client.post("/v1/translate", json={"text": texts[0], "prefix": "x" * 3000})
        assert r.status_code == 422 and r.json()["error"]["param"] == "prefix"
