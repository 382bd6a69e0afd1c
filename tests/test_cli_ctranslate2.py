"""``--engine ctranslate2`` on translate / evaluate / serve, and ``export --format
ctranslate2 | argos``, on a copy of the shipped model: the same answers as the torch engine."""

import io
import json
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from aiayn.cli import main
from aiayn.infer.translate import translate
from aiayn.modeldir import load_model_and_tokenizer
from tests.conftest import REPO_ROOT, write_sample_corpus

pytest.importorskip("ctranslate2", reason="CTranslate2 is not installed (aiayn[ctranslate2])")
pytest.importorskip("transformers", reason="CTranslate2's converter needs transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

MODEL = REPO_ROOT / "models" / "ding-de-en"
LINES = ["Guten Morgen.", "Wie geht es dir?", "Das Buch liegt auf dem Tisch.", "Ja."]


@pytest.fixture(scope="module")
def shipped(shipped_copy):
    directory = shipped_copy
    return directory


def _translate(argv, monkeypatch, capsys) -> list[str]:
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(LINES) + "\n"))
    assert main(argv) == 0
    return capsys.readouterr().out.splitlines()


def test_translate_with_the_ctranslate2_engine_prints_what_torch_prints(
    shipped, monkeypatch, capsys
):
    for options in ([], ["--beam", "4", "--nbest", "2", "--lenpen", "0"]):
        torch_out = _translate(["translate", str(shipped), *options], monkeypatch, capsys)
        ct2 = ["translate", str(shipped), "--engine", "ctranslate2", *options]
        ct2_out = _translate(ct2, monkeypatch, capsys)
        if options:  # index<TAB>score<TAB>text: the scores agree to the printed digits
            torch_out = [line.split("\t")[::2] for line in torch_out]
            ct2_out = [line.split("\t")[::2] for line in ct2_out]
        assert ct2_out == torch_out and len(ct2_out) >= len(LINES)
    assert (shipped / ".ctranslate2").is_dir()  # converted once, kept beside the model


def test_sampling_settings_ctranslate2_takes_otherwise(shipped, monkeypatch, capsys):
    """A top-p below float32's range (CTranslate2 reads 0 and refuses it), a temperature
    below 2**-100, top-k 1: greedy's output with either engine; a seed past 32 bits is an
    error naming the flag and the range."""
    greedy = _translate(["translate", str(shipped)], monkeypatch, capsys)
    for engine, options in [
        ("torch", ["--top-p", "5e-324"]),
        ("torch", ["--temperature", "1e-300"]),
        ("ctranslate2", ["--top-p", "5e-324"]),
        ("ctranslate2", ["--temperature", "1e-300"]),
        ("ctranslate2", ["--top-k", "1", "--temperature", "0.5"]),
    ]:
        argv = ["translate", str(shipped), "--engine", engine, "--sample", *options]
        assert _translate(argv, monkeypatch, capsys) == greedy, (engine, options)
    argv = ["translate", str(shipped), "--engine", "ctranslate2", "--sample"]
    unfiltered = _translate([*argv, "--temperature", "2"], monkeypatch, capsys)
    top_k = ["--temperature", "2", "--top-k", "100000"]
    assert _translate([*argv, *top_k], monkeypatch, capsys) == unfiltered
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(LINES) + "\n"))
    assert main([*argv, "--seed", str(2**32)]) == 2
    assert capsys.readouterr().err == (
        "aiayn translate: error: --seed must be an integer in [0, 4294967295] with --engine "
        "ctranslate2 (CTranslate2's random generator takes 32 bits), got 4294967296\n"
    )


def test_evaluate_with_the_ctranslate2_engine(shipped, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    write_sample_corpus(corpus, n_train=10, n_valid=20, n_test=20)
    scores = {}
    for engine in ("torch", "ctranslate2"):
        out = shipped.parent / f"{engine}.hyp.txt"
        argv = ["evaluate", str(shipped), "--corpus", str(corpus), "--samples", "0"]
        argv += ["--output", str(out)]
        assert main([*argv, "--engine", engine]) == 0
        text = capsys.readouterr().out
        scores[engine] = json.loads(text[: text.rindex("}") + 1])
    for key in ("bleu", "chrf", "valid_ppl", "sentences"):
        assert scores["ctranslate2"][key] == scores["torch"][key]
    assert (shipped.parent / "ctranslate2.hyp.txt").read_text() == (
        shipped.parent / "torch.hyp.txt"
    ).read_text()


def test_export_formats_on_the_command_line(shipped, tmp_path, capsys):
    out = tmp_path / "ct2"
    assert main(["export", str(shipped), "--format", "ctranslate2", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "ctranslate2"
    assert (out / "model.bin").is_file() and (out / "sentencepiece.model").is_file()
    assert main(["export", str(shipped), "--format", "ctranslate2", "--out", str(out)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    package = tmp_path / "de_en.argosmodel"
    argv = ["export", str(shipped), "--format", "argos", "--out", str(package), "--quantize"]
    assert main([*argv, "int8"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["quantization"] == "int8" and zipfile.is_zipfile(package)
    argv = ["export", str(shipped), "--out", str(tmp_path / "hf")]
    assert main([*argv, "--quantize", "int8"]) == 2
    assert "--quantize is for --format ctranslate2 or argos" in capsys.readouterr().err
    assert main([*argv, "--from", "de"]) == 2
    assert "--from and --to are for --format argos" in capsys.readouterr().err
    assert main(["export", str(shipped), "--format", "onnx", "--out", str(tmp_path / "x")]) == 2
    assert "invalid choice: 'onnx'" in capsys.readouterr().err


def test_serve_with_the_ctranslate2_engine_answers_as_the_torch_engine(shipped):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx2")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec
    from tests.serve.conftest import wait_ready

    model, tokenizer = load_model_and_tokenizer(shipped)
    spec = ModelSpec(shipped, "ding", engine="ctranslate2")
    with TestClient(create_app([spec], ServeConfig())) as client:
        wait_ready(client)
        [described] = client.get("/v1/models").json()["data"]
        assert described["engine"] == "ctranslate2"
        r = client.post("/translate", json={"q": LINES, "source": "de", "target": "en"})
        assert r.json()["translatedText"] == [h[0][0] for h in translate(model, tokenizer, LINES)]
        body = {"text": LINES, "beam": 4, "nbest": 2, "lenpen": 0.0}
        got = client.post("/v1/translate", json=body).json()["translations"]
        want = translate(model, tokenizer, LINES, beam=4, nbest=2, lenpen=0.0)
        assert [g["text"] for g in got] == [w[0][0] for w in want]
        r = client.post("/v1/attention", json={"text": LINES[0]})  # the torch model's
        assert r.status_code == 200
    from aiayn.serve.models import check_spec

    with pytest.raises(ValueError, match="engine 'onnx': choose one of auto, torch, ctranslate2"):
        check_spec(ModelSpec(shipped, "x", engine="onnx"))


@pytest.mark.parametrize(
    "codes, option", [(["--from", "../../x", "--to", "en"], "--from '../../x'"),
                      (["--from", "de", "--to", "EN"], "--to 'EN'"),
                      (["--from", "de_DE", "--to", "en"], "--from 'de_DE'")],
)  # fmt: skip
def test_argos_language_codes_are_checked_before_any_work(shipped, tmp_path, capsys, codes, option):
    out = tmp_path / "x.argosmodel"
    argv = ["export", str(shipped), "--format", "argos", *codes, "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{option}: an Argos Translate language code is 2 or 3 lower-case letters" in err
    assert "aiayn-argos-" not in err and not out.exists()


def _test_sentences(n: int) -> list[str]:
    import gzip

    raw = gzip.decompress((REPO_ROOT / "data/ding-de-en/test.de.gz").read_bytes())
    return raw.decode().splitlines()[:n]


def test_the_default_engine_is_auto_ctranslate2_for_greedy_and_beam_search(shipped):
    """aiayn.load, aiayn serve and aiayn translate default to engine "auto": greedy and beam
    search for one translation by CTranslate2, with the torch engine's outputs on the test
    sentences; n-best lists, early stops, scores, prefixes and alignments by the torch model
    (its answers exactly)."""
    import aiayn

    sentences = _test_sentences(64)
    auto, torch_engine = aiayn.load(shipped), aiayn.load(shipped, engine="torch")
    assert auto.engine == "ctranslate2" and auto.engines == {
        "greedy": "ctranslate2",
        "beam": "ctranslate2",
        "other": "torch",
    }
    assert torch_engine.engine == "torch"
    greedy = [t.text for t in auto.translate(sentences, scores=False)]
    assert greedy == [t.text for t in torch_engine.translate(sentences, scores=False)]
    beam = [t.text for t in auto.translate(sentences, beam=4, scores=False)]
    assert beam == [t.text for t in torch_engine.translate(sentences, beam=4, scores=False)]
    assert beam != greedy
    for options in (
        dict(beam=4, nbest=2),  # lenpen 0.6: CTranslate2's second best may differ
        dict(beam=4, early_stop=True),  # CTranslate2's early stop is another rule
        dict(beam=4),  # with scores: CTranslate2's differ in the fourth digit
        dict(prefix=["Good"] * 4),
        dict(alignment=True),
    ):
        got, want = (
            auto.translate(sentences[:4], **options),
            torch_engine.translate(sentences[:4], **options),
        )
        assert got == want, options

    pytest.importorskip("fastapi")
    pytest.importorskip("httpx2")
    from fastapi.testclient import TestClient

    from aiayn.data.passages import Passages
    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec
    from tests.serve.conftest import wait_ready

    with TestClient(create_app([ModelSpec(shipped, "ding")])) as client:
        wait_ready(client)
        [described] = client.get("/v1/models").json()["data"]
        assert described["engine"] == "ctranslate2"
        assert described["engines"] == {
            "greedy": "ctranslate2",
            "beam": "ctranslate2",
            "other": "torch",
        }
        # LibreTranslate's route translates a line sentence by sentence (a few test lines hold
        # two: "Huch! Jetzt wäre es mir fast runtergefallen."), each as aiayn translate does
        lines = Passages(sentences, lambda text: True)
        assert len(lines.texts) > len(sentences)
        r = client.post("/translate", json={"q": sentences, "source": "de", "target": "en"})
        expected = lines.join([t.text for t in torch_engine.translate(lines.texts, scores=False)])
        assert r.json()["translatedText"] == expected
        r = client.post(
            "/translate",
            json={"q": sentences[:4], "source": "de", "target": "en", "alternatives": 1},
        )
        want = torch_engine.translate(sentences[:4], beam=2, nbest=2)
        assert r.json()["alternatives"] == [[t.hypotheses[1].text] for t in want]

    # --beam 4 with two decoders: requests decoded at once answer as aiayn translate
    config = ServeConfig(beam=4, decoders=2)
    with TestClient(create_app([ModelSpec(shipped, "ding")], config)) as client:
        wait_ready(client)
        served = client.app.state.registry.models["ding"]
        assert served.api.fast_decoder().translator.num_translators == 2

        def post(k: int) -> list[str]:
            body = {"q": sentences[k::8], "source": "de", "target": "en"}
            return client.post("/translate", json=body).json()["translatedText"]

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(post, range(8)))
        beams = torch_engine.translate(lines.texts, beam=4, scores=False)
        beam = lines.join([t.text for t in beams])
        assert answers == [beam[k::8] for k in range(8)]


def test_auto_falls_back_to_torch(shipped, monkeypatch):
    import aiayn
    from aiayn.api import engine

    assert aiayn.load(shipped, dtype="bfloat16").engine == "torch"  # CTranslate2: float32
    monkeypatch.setattr(engine, "ctranslate2_installed", lambda: False)
    assert aiayn.load(shipped).engine == "torch"
    with pytest.raises(Exception, match="an ensemble decodes with the torch engine"):
        aiayn.load([shipped, shipped], engine="ctranslate2")
    assert aiayn.load([shipped, shipped]).engine == "torch"  # auto: an ensemble is torch's


def test_a_glossary_needs_the_torch_engine_or_auto(shipped, tmp_path, monkeypatch, capsys):
    glossary = tmp_path / "g.json"
    glossary.write_text(json.dumps({"de_en": {"Buch": "volume"}}))
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(LINES) + "\n"))
    argv = ["translate", str(shipped), "--glossary", str(glossary)]
    assert main([*argv, "--engine", "ctranslate2"]) != 0
    err = capsys.readouterr().err
    assert "--engine 'torch'" in err and "--engine 'auto'" in err and "--glossary" in err
    auto = _translate([*argv, "--engine", "auto"], monkeypatch, capsys)
    assert auto == _translate([*argv, "--engine", "torch"], monkeypatch, capsys)
    assert "volume" in auto[2]
    # with no term in a line the request is CTranslate2's, as with --engine ctranslate2
    plain = _translate(["translate", str(shipped), "--engine", "auto"], monkeypatch, capsys)
    assert plain == _translate(
        ["translate", str(shipped), "--engine", "ctranslate2"], monkeypatch, capsys
    )
