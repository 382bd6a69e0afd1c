"""Ensembles of translators: per step, the members' next-token probabilities averaged. Checked
against a step-by-step recomputation without caches, against the model alone (an ensemble of a
model with itself), through the API and the command line; models that cannot be ensembled are
refused by name."""

import io
import math
import shutil

import pytest
import torch

import aiayn
from aiayn import ModelConfig
from aiayn.cli import main
from aiayn.data.tokenizer import BOS, EOS
from aiayn.errors import UserError
from aiayn.infer.ensemble import Ensemble
from aiayn.infer.translate import source_ids
from aiayn.model import build_model
from aiayn.modeldir import save_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.tolerance import assert_close_to_scale

TEXTS = ["Das ist ein gutes Buch.", "Guten Morgen.", "Wie geht es dir heute?", "Ja."]


@pytest.fixture(scope="module")
def members(tmp_path_factory, shipped_copy):
    """Two tiny translators with other random weights and the shipped model's tokenizer."""
    tokenizer = load_tokenizer(shipped_copy)
    dirs = []
    for seed in (0, 1):
        directory = tmp_path_factory.mktemp("member") / f"m{seed}"
        config = ModelConfig.preset("tiny", vocab_size=tokenizer.vocab_size, max_len=64)
        torch.manual_seed(seed)
        save_model_dir(directory, build_model(config).eval())
        tokenizer.save(directory)
        dirs.append(directory)
    return dirs


def averaged(models, src, tgt) -> torch.Tensor:
    """log mean_i P_i(next | src, tgt) at every position, each model run in full (no cache)."""
    with torch.no_grad():
        outs = [m(src, tgt).float().log_softmax(-1) for m in models]
    return torch.logsumexp(torch.stack(outs), 0) - math.log(len(outs))


def test_greedy_equals_a_step_by_step_recomputation(members):
    ensemble = aiayn.load(members)
    models = list(ensemble.model.members)
    ids, _ = source_ids(ensemble.model, ensemble.tokenizer, TEXTS)
    for text, src in zip(TEXTS, ids, strict=True):
        [got] = ensemble.translate([text], max_len_offset=6)
        tokens, log_prob = [], 0.0
        src_t = torch.tensor([src])
        while len(tokens) < len(src) + 6:
            step = averaged(models, src_t, torch.tensor([[BOS] + tokens]))[0, -1]
            token = int(step.argmax())
            tokens.append(token)
            log_prob += float(step[token])
            if token == EOS:
                break
        assert list(got.best.tokens) == tokens
        assert_close_to_scale(got.best.log_prob, log_prob, 1e-4)


def test_an_ensemble_of_a_model_with_itself_is_the_model(shipped_copy):
    one = aiayn.load(shipped_copy)
    two = aiayn.load([shipped_copy, shipped_copy])
    for options in ({}, {"beam": 4}, {"prefix": ["The"] * len(TEXTS)}):
        a, b = one.translate(TEXTS, **options), two.translate(TEXTS, **options)
        assert [t.text for t in a] == [t.text for t in b]
        assert_close_to_scale([t.score for t in a], [t.score for t in b], 1e-5)
    assert_close_to_scale(two.score(TEXTS[:2], ["A good book.", "Good morning."]),
                          one.score(TEXTS[:2], ["A good book.", "Good morning."]), 1e-5)  # fmt: skip


def test_beam_search_of_an_ensemble_in_a_batch_equals_each_sentence_alone(members):
    ensemble = aiayn.load(members)
    together = ensemble.translate(TEXTS, beam=3, max_len_offset=6)
    alone = [ensemble.translate([t], beam=3, max_len_offset=6)[0] for t in TEXTS]
    assert [t.best.tokens for t in together] == [t.best.tokens for t in alone]
    assert_close_to_scale([t.score for t in together], [t.score for t in alone], 1e-5)


def test_models_that_cannot_be_ensembled_are_refused(members, tmp_path, shipped_copy):
    from sentencepiece import sentencepiece_model_pb2

    other = tmp_path / "other"  # the same model with another tokenizer: one piece's score moved
    shutil.copytree(members[1], other)
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString((shipped_copy / "tokenizer.model").read_bytes())
    proto.pieces[100].score -= 1.0
    (other / "tokenizer.model").write_bytes(proto.SerializeToString())
    with pytest.raises(UserError, match="share one tokenizer"):
        aiayn.load([members[0], other])
    with pytest.raises(UserError, match="torch engine"):
        aiayn.load(members, engine="ctranslate2")
    with pytest.raises(UserError, match="two models or more"):
        Ensemble([aiayn.load(members[0]).model])
    tokenizer = load_tokenizer(shipped_copy)
    small = tmp_path / "small"
    config = ModelConfig.preset("tiny", vocab_size=tokenizer.vocab_size, max_len=32)
    save_model_dir(small, build_model(config).eval())
    tokenizer.save(small)
    with pytest.raises(UserError, match="model 2 has max_len 32, model 1 64"):
        aiayn.load([members[0], small])
    with pytest.raises(UserError, match="attention maps belong to one model"):
        aiayn.load(members).attention("Hallo")


def test_the_command_line_translates_with_an_ensemble(members, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(TEXTS) + "\n"))
    assert main(["translate", *map(str, members), "--beam", "2", "--max-len-offset", "6"]) == 0
    out = capsys.readouterr().out.splitlines()
    want = aiayn.load(members).translate(TEXTS, beam=2, max_len_offset=6)
    assert out == [t.text for t in want]
    argv = ["translate", *map(str, members), "--engine", "ctranslate2"]
    assert main(argv) == 2
    assert "an ensemble decodes with --engine torch" in capsys.readouterr().err


def test_the_server_serves_an_ensemble_as_one_translator(members):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx2")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.server import model_specs
    from tests.serve.conftest import wait_ready

    dirs = list(map(str, members))
    [spec] = model_specs(dirs, ["both"], ["de-en"], ensemble=True)
    with TestClient(create_app([spec], ServeConfig(beam=2))) as client:
        wait_ready(client)
        r = client.post("/translate", json={"q": TEXTS, "source": "de", "target": "en"})
        want = aiayn.load(members).translate(TEXTS, beam=2)
        assert r.json() == {"translatedText": [t.text for t in want]}
        r = client.post("/v1/translate", json={"text": TEXTS[:2], "alignment": True})
        got = r.json()["translations"]
        want = aiayn.load(members).translate(TEXTS[:2], alignment=True)
        assert [t["text"] for t in got] == [t.text for t in want]
        assert [[tuple(p) for p in t["alignment"]] for t in got] == [
            list(t.alignment) for t in want
        ]
        # each member by its name, never the host's directory
        assert client.get("/v1/models/both").json()["ensemble"] == [m.name for m in members]
    with pytest.raises(ValueError, match="give two or more"):
        model_specs(dirs[:1], ensemble=True)
    with pytest.raises(ValueError, match="torch engine"):
        model_specs(dirs, engine="ctranslate2", ensemble=True)
    with pytest.raises(ValueError, match="at most one --name"):
        model_specs(dirs, ["a", "b"], ensemble=True)
