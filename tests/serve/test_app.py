"""The HTTP API against the library functions the command line calls."""

import base64
import json
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from aiayn.infer.classify import classify_texts
from aiayn.infer.embed import embed_texts
from aiayn.infer.sampling import generate
from aiayn.infer.translate import translate
from aiayn.modeldir import load_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.serve.conftest import make_client, wait_ready
from tests.tolerance import assert_close_to_scale

pytest.importorskip("fastapi")
pytest.importorskip("httpx2")  # FastAPI's TestClient

SENTENCES = [
    "Das ist ein gutes Buch.",
    "Ich habe Hunger.",
    "Er kam gestern sehr spät nach Hause, weil der Zug Verspätung hatte.",
    "Ja.",
    "Wir sehen uns morgen im Büro.",
    "Könnten Sie das bitte wiederholen?",
]


def _load(path):
    return load_model_dir(path), load_tokenizer(path)


def test_health_models_and_languages(client, model_dirs):
    assert client.get("/health").json() == {"status": "ok"}
    models = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
    assert list(models) == ["de-en", "sentiment", "lm"]
    model, tokenizer = _load(model_dirs["translator"])
    assert models["de-en"]["family"] == "encoder-decoder"
    assert models["de-en"]["parameters"] == sum(p.numel() for p in model.parameters())
    assert models["de-en"]["vocab_size"] == tokenizer.vocab_size
    assert models["de-en"]["languages"] == ["de", "en"]
    assert models["sentiment"]["labels"] == ["neg", "neutral", "pos"]
    assert models["lm"]["family"] == "decoder-only" and models["lm"]["languages"] is None
    assert client.get("/languages").json() == [
        {"code": "de", "name": "German", "targets": ["de", "en"]},
        {"code": "en", "name": "English", "targets": ["en"]},
    ]
    from aiayn.serve.detect import detect

    (found,) = detect(["Hallo Welt"], ["de", "en"])  # German, by lexilang's word lists
    assert found[0] == "de"
    assert client.post("/detect", data={"q": "Hallo Welt"}).json() == [
        {"language": "de", "confidence": found[1]}
    ]
    paths = client.get("/openapi.json").json()["paths"]
    for route in ("/translate", "/v1/translate", "/v1/completions", "/v1/classify",
                  "/v1/embeddings", "/v1/attention", "/languages", "/detect"):  # fmt: skip
        assert route in paths


def test_libretranslate_json_and_form_bodies(client, model_dirs):
    model, tokenizer = _load(model_dirs["translator"])
    want = [h[0][0] for h in translate(model, tokenizer, SENTENCES[:2])]
    r = client.post("/translate", json={"q": SENTENCES[0], "source": "de", "target": "en"})
    assert r.status_code == 200 and r.json() == {"translatedText": want[0]}
    r = client.post("/translate", data={"q": SENTENCES[0], "source": "auto", "target": "en"})
    from aiayn.serve.detect import detect

    (found,) = detect(SENTENCES[:1], ["de", "en"])
    assert found[0] == "de" and found[1] > 50
    assert r.json() == {
        "translatedText": want[0],
        "detectedLanguage": {"language": "de", "confidence": found[1]},
    }
    r = client.post("/translate", json={"q": SENTENCES[:2], "source": "de", "target": "en"})
    assert r.json() == {"translatedText": want}
    r = client.post("/translate", data={"q": SENTENCES[:2], "source": "de", "target": "en"})
    assert r.json() == {"translatedText": want}  # a repeated form field is a list
    r = client.post(
        "/translate", data={"q": SENTENCES[1], "source": "de", "target": "en", "alternatives": "2"}
    )
    n_best = translate(model, tokenizer, SENTENCES[1:2], beam=3, nbest=3)[0]
    assert r.json() == {"translatedText": n_best[0][0], "alternatives": [t for t, _ in n_best[1:]]}


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"q": "Hallo", "source": "de", "target": "fr"}, 400, ["fr is not supported"]),
        (
            {"q": "Hallo", "source": "en", "target": "de"},
            400,
            ["German (de) is not available as a target language from English (en)"],
        ),
        (
            {"q": "<b>Hallo</i>", "source": "de", "target": "en", "format": "html"},
            400,
            ["q: line 1"],
        ),
        ({"q": "Hallo", "source": "de"}, 400, ["Invalid request: missing target parameter"]),
        ({"q": [], "source": "de", "target": "en"}, 400, ["Invalid request: missing q parameter"]),
        ({"q": "Ja", "source": "de", "target": "en", "alternatives": 8}, 400, ["alternatives"]),
        ({"q": "Ja", "source": "de", "target": "en", "format": "md"}, 400, ["md format is not"]),
    ],
)
def test_libretranslate_errors_name_the_field(client, body, status, words):
    """LibreTranslate's status (400) and, where it has one, its message."""
    r = client.post("/translate", json=body)
    assert r.status_code == status
    assert all(w in r.json()["error"] for w in words), r.json()


def test_v1_translate_greedy_and_beam_with_scores(client, model_dirs):
    model, tokenizer = _load(model_dirs["translator"])
    r = client.post("/v1/translate", json={"text": SENTENCES[:3]})
    greedy = translate(model, tokenizer, SENTENCES[:3])
    assert [t["text"] for t in r.json()["translations"]] == [h[0][0] for h in greedy]
    assert r.json()["translations"][0]["score"] is None  # greedy search keeps no score
    body = {"model": "de-en", "text": SENTENCES[:3], "beam": 3, "nbest": 2, "lenpen": 1.0}
    got = client.post("/v1/translate", json=body).json()["translations"]
    want = translate(model, tokenizer, SENTENCES[:3], beam=3, nbest=2, lenpen=1.0)
    for g, w in zip(got, want, strict=True):
        assert [h["text"] for h in g["nbest"]] == [text for text, _ in w]
        assert_close_to_scale([h["score"] for h in g["nbest"]], [score for _, score in w])
        assert g["text"] == w[0][0]


def test_serve_quantized_models(model_dirs):
    """--quantize int8: the server's answers are the int8 model's, and /v1/models says so."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    specs = [ModelSpec(model_dirs[k], k, quantize="int8") for k in ("translator", "classifier")]
    with TestClient(create_app(specs, ServeConfig())) as c:
        wait_ready(c)
        models = {m["id"]: m for m in c.get("/v1/models").json()["data"]}
        assert models["translator"]["quantization"] == "int8"
        float_model, tokenizer = _load(model_dirs["translator"])
        assert models["translator"]["parameters"] >= sum(
            p.numel() for p in float_model.parameters()
        )
        int8 = load_model_dir(model_dirs["translator"], quantize="int8")
        got = c.post("/v1/translate", json={"model": "translator", "text": SENTENCES}).json()
        assert [t["text"] for t in got["translations"]] == [
            h[0][0] for h in translate(int8, tokenizer, SENTENCES)
        ]
        probs = c.post("/v1/classify", json={"model": "classifier", "input": SENTENCES})
        int8 = load_model_dir(model_dirs["classifier"], quantize="int8")
        want = classify_texts(int8, load_tokenizer(model_dirs["classifier"]), SENTENCES)
        got = [[p["score"] for p in r["probabilities"]] for r in probs.json()["results"]]
        assert_close_to_scale(torch.tensor(got), want)


def _translate_concurrently(client, texts, **options):
    with ThreadPoolExecutor(len(texts)) as pool:
        jobs = [
            pool.submit(client.post, "/v1/translate", json={"text": t, **options}) for t in texts
        ]
        return [j.result().json()["translations"][0] for j in jobs]


@pytest.mark.parametrize("options", [{}, {"beam": 3, "nbest": 2}])
def test_batched_requests_get_what_they_get_alone(model_dirs, options):
    # one decoder, which waits for company (two take a lone request at once)
    with make_client(model_dirs, batch_wait_ms=300, decoders=1) as client:
        wait_ready(client)
        sizes = []
        queue = client.app.state.registry.queues["de-en"]
        record = queue.on_batch
        queue.on_batch = lambda items, jobs, s: (sizes.append(jobs), record(items, jobs, s))
        alone = [
            client.post("/v1/translate", json={"text": t, **options}).json() for t in SENTENCES
        ]
        assert sizes == [1] * len(SENTENCES)
        together = _translate_concurrently(client, SENTENCES, **options)
    assert max(sizes[len(SENTENCES) :]) > 1  # some requests did share a batch
    for got, want in zip(together, [a["translations"][0] for a in alone], strict=True):
        assert [h["text"] for h in got["nbest"]] == [h["text"] for h in want["nbest"]]
        if options:  # the same hypotheses; their scores up to the batch's float rounding
            scores = [h["score"] for h in want["nbest"]]
            assert_close_to_scale([h["score"] for h in got["nbest"]], scores)


def test_classify_matches_the_library(client, model_dirs):
    model, tokenizer = _load(model_dirs["classifier"])
    texts = ["Ein schöner Film.", "Schlecht.", "Na ja, es geht so."]
    r = client.post("/v1/classify", json={"input": texts})
    want = classify_texts(model, tokenizer, texts)
    results = r.json()["results"]
    for res, row in zip(results, want, strict=True):
        assert [p["label"] for p in res["probabilities"]] == ["neg", "neutral", "pos"]
        assert_close_to_scale(torch.tensor([p["score"] for p in res["probabilities"]]), row)
        assert res["label"] == ["neg", "neutral", "pos"][int(row.argmax())]
    one = client.post("/v1/classify", json={"model": "sentiment", "input": texts[1]}).json()
    assert one["results"][0]["label"] == results[1]["label"]


def test_embeddings_match_the_library_in_both_encodings(client, model_dirs):
    model, tokenizer = _load(model_dirs["classifier"])
    texts = ["Ein Satz.", "Noch ein etwas längerer Satz."]
    want = embed_texts(model, tokenizer, texts)
    r = client.post("/v1/embeddings", json={"input": texts}).json()
    assert r["object"] == "list" and [d["index"] for d in r["data"]] == [0, 1]
    got = torch.tensor([d["embedding"] for d in r["data"]])
    assert_close_to_scale(got, want)
    assert r["usage"]["prompt_tokens"] == sum(len(x) + 1 for x in tokenizer.encode(texts))
    b64 = client.post("/v1/embeddings", json={"input": texts[0], "encoding_format": "base64"})
    raw = base64.b64decode(b64.json()["data"][0]["embedding"])
    vector = torch.tensor(struct.unpack(f"<{len(raw) // 4}f", raw))
    assert_close_to_scale(vector, want[0])
    unit = client.post("/v1/embeddings", json={"input": texts, "normalize": True}).json()
    norms = torch.tensor([d["embedding"] for d in unit["data"]]).norm(dim=-1)
    assert_close_to_scale(norms, torch.ones(2))


def test_completion_matches_generate_and_streams_the_same_text(client, model_dirs):
    model, tokenizer = _load(model_dirs["lm"])
    body = {"prompt": "the quick", "max_tokens": 20, "temperature": 0.9, "top_k": 10, "seed": 7}
    r = client.post("/v1/completions", json=body).json()
    prompt = tokenizer.encode(["the quick"])[0]
    out = generate(model, torch.tensor([prompt]), 20, 0.9, 10, seed=7, eos_id=3, context=32)
    assert r["choices"][0]["text"] == tokenizer.decode([out[0, len(prompt) :].tolist()])[0]
    assert r["object"] == "text_completion" and r["model"] == "lm"
    assert r["usage"] == {"prompt_tokens": 9, "completion_tokens": 20, "total_tokens": 29}
    assert r["choices"][0]["finish_reason"] == "length"
    with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in s.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == r["choices"][0]["text"]
    assert len(chunks) > 5 and chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_attention_has_every_layer_and_head(client, model_dirs):
    r = client.post("/v1/attention", json={"text": SENTENCES[1], "beam": 2}).json()
    model, _ = _load(model_dirs["translator"])
    c = model.config
    want = client.post("/v1/translate", json={"text": SENTENCES[1], "beam": 2}).json()
    assert r["translation"] == want["translations"][0]["text"]
    s, t = len(r["source_tokens"]), len(r["output_tokens"])
    assert r["source_tokens"][-1] == "</s>" and r["decoder_input_tokens"][0] == "<s>"
    for key, shape in (("cross", (t, s)), ("encoder", (s, s)), ("decoder", (t, t))):
        w = torch.tensor(r[key])
        assert w.shape == (c.n_decoder_layers if key != "encoder" else c.n_encoder_layers,
                           c.n_heads, *shape)  # fmt: skip
        # absolute: each weight is sent rounded to 4 decimals
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-3, rtol=0)


@pytest.mark.parametrize(
    "route, body, status, field",
    [
        ("/v1/translate", {"text": "Hallo", "beam": 0}, 422, "beam"),
        ("/v1/translate", {"text": "Hallo", "beam": 9}, 422, "beam"),
        ("/v1/translate", {"text": "Hallo", "beam": 2, "nbest": 3}, 422, "nbest"),
        ("/v1/translate", {"text": "Hallo", "lenpen": "nan"}, 422, "lenpen"),
        ("/v1/translate", {"text": "Hallo", "model": "nope"}, 404, "model"),
        ("/v1/translate", {"text": "Hallo", "model": "lm"}, 422, "model"),
        ("/v1/translate", {"text": ["a"] * 65}, 422, "text"),
        ("/v1/translate", {"text": ["a", "b" * 2001]}, 422, "text[1]"),
        ("/v1/translate", {"text": ["a", "Wort " * 60]}, 422, "text[1]"),
        ("/v1/completions", {"prompt": "the", "temperature": -1}, 422, "temperature"),
        ("/v1/completions", {"prompt": "the", "top_p": 0}, 422, "top_p"),
        ("/v1/completions", {"prompt": "the", "max_tokens": 513}, 422, "max_tokens"),
        ("/v1/completions", {"prompt": "the " * 10}, 422, "prompt"),
        ("/v1/classify", {"input": "x", "model": "de-en"}, 422, "model"),
        ("/v1/embeddings", {"input": "x", "encoding_format": "int8"}, 422, "encoding_format"),
    ],
)
def test_bad_parameters_name_the_field(client, route, body, status, field):
    r = client.post(route, json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == field and field in error["message"], error


def test_malformed_bodies(client):
    r = client.post("/v1/translate", content=b"{bad", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    bad_utf8 = b'{"text": "\xff\xfe"}'
    for route in ("/v1/translate", "/translate"):
        r = client.post(route, content=bad_utf8, headers={"content-type": "application/json"})
        assert r.status_code in (400, 422), r.text
    form = {"content-type": "application/x-www-form-urlencoded"}
    for body in (b"q=\xff\xfe&source=de&target=en", b"q=%FF&source=de&target=en"):
        r = client.post("/translate", content=body, headers=form)
        assert r.status_code == 400 and "UTF-8" in r.json()["error"], r.text
    r = client.post("/v1/translate", content=b"x" * 1_000_001)
    assert r.status_code == 413 and "max-body-bytes" in r.json()["error"]["message"]
    r = client.post("/translate", content=b"x" * 1_000_001)
    assert r.status_code == 413 and "max-body-bytes" in r.json()["error"]


class Gate:
    """Holds a model's calls until opened, to see the server while it works."""

    def __init__(self, served, method="translate"):
        self.started, self.open = threading.Event(), threading.Event()
        original = getattr(served, method)

        def held(*args, **kwargs):
            self.started.set()
            assert self.open.wait(300)
            return original(*args, **kwargs)

        setattr(served, method, held)


def test_health_answers_during_a_long_batch_and_a_full_queue_is_503(model_dirs):
    # one decoder: the second request waits in the queue while the first decodes
    with make_client(model_dirs, queue_size=1, batch_wait_ms=0, decoders=1) as client:
        wait_ready(client)
        gate = Gate(client.app.state.registry.models["de-en"])
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(client.post, "/v1/translate", json={"text": "Ja."})
            assert gate.started.wait(300)
            t0 = time.perf_counter()
            assert client.get("/health").status_code == 200
            assert time.perf_counter() - t0 < 5
            second = pool.submit(client.post, "/v1/translate", json={"text": "Nein.", "beam": 2})
            while client.app.state.registry.queues["de-en"].depth < 1:
                time.sleep(0.01)
            full = client.post("/v1/translate", json={"text": "Doch."})
            assert full.status_code == 503 and full.headers["retry-after"] == "1"
            assert "waiting" in full.json()["error"]["message"]
            gate.open.set()
            assert first.result().status_code == 200 and second.result().status_code == 200


def test_a_slow_request_times_out_with_504(model_dirs):
    with make_client(model_dirs, timeout=0.3) as client:
        wait_ready(client)
        gate = Gate(client.app.state.registry.models["de-en"])
        r = client.post("/v1/translate", json={"text": "Ja."})
        gate.open.set()
        assert r.status_code == 504 and "--timeout" in r.json()["error"]["message"]


def test_requests_queued_behind_a_batch_that_times_out_are_served(model_dirs, caplog):
    """--timeout counts a request's decoding, not its wait in the queue: the first request's
    batch (held here, as a slow constrained search holds the decoder) gives it a 504 after
    --timeout; the two queued behind it, which waited longer than --timeout by then, are
    translated once the batch ends, and the first one's late result is dropped."""
    timeout = 1.5
    with make_client(model_dirs, timeout=timeout, batch_wait_ms=0, decoders=1) as client:
        wait_ready(client)
        registry = client.app.state.registry
        served, queue = registry.models["de-en"], registry.queues["de-en"]
        want = [t.hypotheses[0].text for t in served.translate(SENTENCES[:2], scores=False)]
        gate = Gate(served)
        with ThreadPoolExecutor(3) as pool:
            slow = pool.submit(client.post, "/v1/translate", json={"text": SENTENCES[3]})
            assert gate.started.wait(300)
            queued_at = time.monotonic()
            behind = [pool.submit(client.post, "/v1/translate", json={"text": t}) for t in SENTENCES[:2]]  # fmt: skip
            while queue.depth < 2:
                time.sleep(0.01)
            assert slow.result(60).status_code == 504
            assert "--timeout" in slow.result().json()["error"]["message"]
            while time.monotonic() - queued_at < timeout + 0.5:  # over --timeout in the queue
                time.sleep(0.05)
            assert not any(b.done() for b in behind)
            gate.open.set()
            answers = [b.result(60) for b in behind]
        assert [a.status_code for a in answers] == [200, 200], answers[0].text
        assert [a.json()["translations"][0]["text"] for a in answers] == want
        deadline = time.monotonic() + 30
        while queue.outstanding and time.monotonic() < deadline:  # the slow batch's answer
            time.sleep(0.01)
        assert queue.outstanding == 0 and queue.depth == 0
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_a_stream_queued_behind_a_slow_completion_is_not_cut(model_dirs):
    """A streamed completion's --timeout (between two tokens) starts when it begins to
    generate: queued behind a completion held past --timeout, it streams to its end."""
    timeout = 1.0
    body = {"prompt": "the", "max_tokens": 5, "temperature": 0}
    with make_client(model_dirs, timeout=timeout, decoders=1) as client:
        wait_ready(client)
        gate = Gate(client.app.state.registry.models["lm"], "complete")
        with ThreadPoolExecutor(2) as pool:
            slow = pool.submit(client.post, "/v1/completions", json=body)
            assert gate.started.wait(300)

            def stream() -> str:
                with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as s:
                    return "".join(s.iter_text())

            streamed = pool.submit(stream)
            queue = client.app.state.registry.queues["lm"]
            while queue.depth < 1:
                time.sleep(0.01)
            assert slow.result(60).status_code == 504
            time.sleep(timeout)  # the stream has waited over --timeout in the queue
            gate.open.set()
            events = streamed.result(60)
    assert "--timeout" not in events and events.endswith("data: [DONE]\n\n"), events
    assert '"finish_reason": "length"' in events


def test_health_is_503_while_loading(model_dirs, monkeypatch):
    from aiayn.serve import registry

    release = threading.Event()
    original = registry.ServedModel

    def slow(spec, **options):
        assert release.wait(20)
        return original(spec, **options)

    monkeypatch.setattr(registry, "ServedModel", slow)
    with make_client(model_dirs) as client:
        r = client.get("/health")
        assert r.status_code == 503 and r.json() == {"status": "loading"}
        r = client.post("/v1/translate", json={"text": "Ja."})
        assert r.status_code == 503 and "loading" in r.json()["error"]["message"]
        release.set()
        wait_ready(client)


def test_metrics_count_requests_and_batches(client):
    client.post("/v1/translate", json={"text": "Ja."})
    text = client.get("/metrics").text
    assert 'aiayn_requests_total{route="/v1/translate",status="200"}' in text
    assert 'aiayn_batch_texts_count{model="de-en"}' in text
    assert 'aiayn_queue_depth{model="de-en"} 0.0' in text


def test_the_page_is_served(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "<script>" in r.text and 'id="heatmap"' in r.text
    assert "http://" not in r.text and "https://" not in r.text  # no CDN: works offline


def test_completion_text_holds_back_a_split_character(model_dirs):
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.serve.models import CompletionText

    tokenizer = Tokenizer.load(model_dirs["translator"])
    ids = tokenizer.encode(["Straße 5 €"])[0]
    assert any(tokenizer.sp.is_byte(i) for i in ids)  # € is spelled in byte pieces
    stream = CompletionText(tokenizer, tokenizer.encode(["Preis:"])[0])
    pieces = [stream.push(i) for i in ids] + [stream.flush()]
    assert "".join(pieces) == stream.completion == " Straße 5 €"
    assert all("\ufffd" not in p for p in pieces)
    assert "" in pieces[:-1]  # held back while € was incomplete


def test_a_stopped_completion_ends_after_the_current_token(model_dirs):
    from aiayn.serve.models import ModelSpec, ServedModel

    served = ServedModel(ModelSpec(model_dirs["lm"], "lm"))
    stop, seen = threading.Event(), []

    def emit(text):
        seen.append(text)
        stop.set()

    text, n, reason = served.complete(served.prompt_ids("the"), 50, 0.0, 0, 1.0, None, emit, stop)
    assert (n, reason) == (1, "cancelled") and "".join(seen) == text


def test_serve_command_passes_quantize_to_every_model(model_dirs):
    from aiayn.cli import build_parser
    from aiayn.serve.server import model_specs

    dirs = [str(model_dirs["translator"]), str(model_dirs["lm"])]
    args = build_parser().parse_args(["serve", *dirs, "--quantize", "int8"])
    specs = model_specs(args.model_dir, args.name, args.languages, args.quantize)
    assert [s.quantize for s in specs] == ["int8", "int8"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", *dirs, "--quantize", "int4"])


def test_a_model_of_another_family_is_named_with_its_article(client):
    r = client.post("/v1/completions", json={"prompt": "the", "model": "de-en"})
    assert r.status_code == 422
    assert "/v1/completions needs a decoder-only model" in r.json()["error"]["message"]
    r = client.post("/v1/translate", json={"text": "Hallo", "model": "lm"})
    assert "/v1/translate needs an encoder-decoder model" in r.json()["error"]["message"]


@pytest.mark.parametrize("decoders", [1, 2])
@pytest.mark.parametrize("beam", [1, 3])
def test_translate_under_load_answers_what_aiayn_translate_prints(
    model_dirs, beam, decoders, monkeypatch, capsys
):
    """LibreTranslate's /translate with the server's default engine, requests sent at once:
    each text's translation is the line `aiayn translate` prints for it. One decoder waits
    for company, so requests share a batch; two take a request that comes while the load is
    that small at once, each on a decoder of its own."""
    import io

    from aiayn.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(SENTENCES) + "\n"))
    argv = ["translate", str(model_dirs["translator"]), "--beam", str(beam)]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    served = {"translator": model_dirs["translator"]}
    with make_client(served, batch_wait_ms=300, beam=beam, decoders=decoders) as client:
        wait_ready(client)
        sizes = []
        queue = client.app.state.registry.queues["de-en"]
        record = queue.on_batch
        queue.on_batch = lambda items, jobs, s: (sizes.append(jobs), record(items, jobs, s))
        with ThreadPoolExecutor(len(SENTENCES)) as pool:
            body = {"source": "de", "target": "en"}
            jobs = [
                pool.submit(client.post, "/translate", json={"q": t, **body}) for t in SENTENCES
            ]
            got = [j.result().json()["translatedText"] for j in jobs]
    if decoders == 1:
        assert max(sizes) > 1  # requests did share a batch
    assert got == printed
