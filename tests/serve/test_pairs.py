"""Many language pairs in one server, over HTTP as LibreTranslate's clients see it: three
tiny translators sharing English (de-en, en-fr, en-es), each loaded when a request first
needs it, at most ``--max-loaded`` at once, and de -> fr / de -> es translated through
English (Argos Translate's pivot) on every LibreTranslate route."""

import threading
import time

import pytest

from tests.serve.conftest import PAIRS, wait_ready

pytest.importorskip("fastapi")

GERMAN = "Das Buch ist gut. Wo ist der Bahnhof?\n\nIch habe Hunger."


def pairs_app(pair_dirs, extra=(), **limits):
    """The app serving the three pairs (and ``extra`` specs) with the torch engine, its
    metrics on."""
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    specs = [ModelSpec(path, name, engine="torch") for name, path in pair_dirs.items()]
    config = ServeConfig(**limits)
    return create_app(
        [*specs, *extra], config, access=AccessConfig(metrics=True, metrics_open=True)
    )


def started(app):
    from fastapi.testclient import TestClient

    client = TestClient(app)
    client.__enter__()
    wait_ready(client)
    return client


@pytest.fixture(scope="module")
def client(pair_dirs):
    """The three pairs, no bound on the models loaded."""
    c = started(pairs_app(pair_dirs))
    yield c
    c.__exit__(None, None, None)


def translate(client, q, source, target, **fields):
    r = client.post("/translate", json={"q": q, "source": source, "target": target, **fields})
    assert r.status_code == 200, r.text
    return r.json()


def translated_file(client, content: bytes, source, target, name="brief.txt") -> bytes:
    files = {"file": (name, content, "text/plain")}
    r = client.post("/translate_file", data={"source": source, "target": target}, files=files)
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    download = client.get(url[url.index("/download_file/") :])
    assert download.status_code == 200
    return download.content


def models(client) -> dict:
    return {m["id"]: m for m in client.get("/v1/models").json()["data"]}


def sample(client, name: str, labels: dict | None = None) -> float | None:
    return client.app.state.registry.metrics.registry.get_sample_value(name, labels or {})


def loaded(client) -> set[str]:
    return set(client.app.state.registry.models)


def settled(client, most: int, seconds: float = 10.0) -> set[str]:
    """The loaded models once at most ``most`` are (a release unloads on the loader's
    thread, after the answer)."""
    deadline = time.monotonic() + seconds
    while len(loaded(client)) > most and time.monotonic() < deadline:
        time.sleep(0.01)
    return loaded(client)


# --- the routes ---------------------------------------------------------------------------


def test_languages_lists_every_target_direct_or_through_a_pivot(pair_dirs):
    c = started(pairs_app(pair_dirs))
    try:
        listed = {x["code"]: x["targets"] for x in c.get("/languages").json()}
        assert listed == {
            "de": ["de", "en", "fr", "es"],  # fr and es through en
            "en": ["en", "fr", "es"],
            "fr": ["fr"],
            "es": ["es"],
        }
        assert c.get("/health").json() == {"status": "ok"}
        assert loaded(c) == set()  # ready, and nothing loaded: listing loads nothing
    finally:
        c.__exit__(None, None, None)


def test_each_pair_answers_as_its_own_model(client):
    """/translate picks the model of the pair: its answer is that model's, as /v1/translate
    gives it by name (one sentence: the same text whole)."""
    for source, target in PAIRS:
        q = "Das Buch ist gut." if source == "de" else "The book is good."
        got = translate(client, q, source, target)["translatedText"]
        r = client.post("/v1/translate", json={"model": f"{source}-{target}", "text": q})
        assert r.status_code == 200, r.text
        assert got == r.json()["translations"][0]["text"]


@pytest.mark.parametrize("target", ["fr", "es"])
def test_a_pivoted_pair_is_the_two_pairs_translated_in_turn(client, target):
    """de -> fr (no model) is de -> en, then en -> fr, on each route, as a client translating
    twice through the API gets it."""
    english = translate(client, GERMAN, "de", "en")["translatedText"]
    twice = translate(client, english, "en", target)["translatedText"]
    assert translate(client, GERMAN, "de", target)["translatedText"] == twice
    assert "\n\n" in twice  # its paragraphs kept through both

    batch = [GERMAN, "Guten Morgen!"]
    english = translate(client, batch, "de", "en")["translatedText"]
    assert (
        translate(client, batch, "de", target)["translatedText"]
        == (translate(client, english, "en", target)["translatedText"])
    )

    page = "<p>Das <b>Buch</b> ist gut.</p><p>Wo ist der Bahnhof?</p>"
    html = dict(format="html")
    english = translate(client, page, "de", "en", **html)["translatedText"]
    twice = translate(client, english, "en", target, **html)["translatedText"]
    assert translate(client, page, "de", target, **html)["translatedText"] == twice
    assert twice.count("<p>") == 2 and "<b>" in twice
    found = translate(client, page, "auto", target, **html)  # detected by its words: German
    assert (found["translatedText"], found["detectedLanguage"]["language"]) == (twice, "de")

    document = GERMAN.encode() + b"\n"
    english = translated_file(client, document, "de", "en")
    assert translated_file(client, document, "de", target) == (
        translated_file(client, english, "en", target)
    )
    assert translated_file(client, document, "auto", target) == (
        translated_file(client, document, "de", target)
    )


def test_a_pivoted_pair_with_auto_and_alternatives(client):
    """Alternatives through a pivot: the composition's n-best (each pivot hypothesis
    translated again, ranked by the summed scores), so each one is a translation of one of
    the first pair's hypotheses; under 'auto' each text takes its detected language's
    route, pivoted or direct."""
    first = translate(client, "Das Buch ist gut.", "de", "en", alternatives=2)
    candidates = set()
    for english in [first["translatedText"], *first["alternatives"]]:
        second = translate(client, english, "en", "fr", alternatives=2)
        candidates |= {second["translatedText"], *second["alternatives"]}
    got = translate(client, "Das Buch ist gut.", "de", "fr", alternatives=2)
    shown = [got["translatedText"], *got["alternatives"]]
    assert len(shown) == len(set(shown)) <= 3 and set(shown) <= candidates

    from aiayn.serve.detect import detect

    texts = ["Das Buch ist gut.", "The book is good."]  # de -> en -> es, en -> es
    got = translate(client, texts, "auto", "es", alternatives=2)
    codes = [x["code"] for x in client.get("/languages").json()]
    found = detect(texts, codes)
    assert [code for code, _ in found] == ["de", "en"]
    assert got["detectedLanguage"] == [{"language": c, "confidence": v} for c, v in found]
    named = [
        translate(client, texts[0], "de", "es", alternatives=2),
        translate(client, texts[1], "en", "es", alternatives=2),
    ]
    assert got["translatedText"] == [n["translatedText"] for n in named]
    assert got["alternatives"] == [n["alternatives"] for n in named]


def test_the_other_libretranslate_routes_answer_with_three_pairs(client):
    codes = {"auto", "de", "en", "fr", "es"}
    settings = client.get("/frontend/settings").json()
    assert {settings["language"][side]["code"] for side in ("source", "target")} <= codes
    r = client.post("/detect", json={"q": "Das Buch ist gut."})
    assert r.status_code == 200 and {d["language"] for d in r.json()} <= codes
    r = client.post("/translate", json={"q": "Hallo.", "source": "fr", "target": "de"})
    assert r.status_code == 400  # fr translates into nothing here
    assert r.json()["error"] == "German (de) is not available as a target language from French (fr)"
    r = client.post("/translate", json={"q": "Hallo.", "source": "de", "target": "it"})
    assert r.status_code == 400 and r.json()["error"] == "it is not supported"
    assert translate(client, "Bonjour.", "fr", "fr")["translatedText"] == "Bonjour."


def test_a_request_glossary_needs_a_pair_served_directly(client):
    body = {"q": "Das Buch.", "source": "de", "target": "fr", "glossary": {"Buch": "livre"}}
    r = client.post("/translate", json=body)
    assert r.status_code == 400
    assert "through en" in r.json()["error"] and "glossary" in r.json()["error"]
    files = {"file": ("a.txt", b"Das Buch.", "text/plain")}
    form = {"source": "de", "target": "fr", "glossary": '{"Buch": "livre"}'}
    r = client.post("/translate_file", data=form, files=files)
    assert r.status_code == 400 and "through en" in r.json()["error"]
    served = translate(client, "Das Buch.", "de", "en", glossary={"Buch": "livre"})
    assert "livre" in served["translatedText"]  # a pair served directly uses the term


# --- loading on first use -----------------------------------------------------------------


def test_a_pair_loads_when_first_asked_for_and_its_load_is_measured(pair_dirs, model_dirs):
    """Ready with nothing loaded; a pair loads on its first request (timed: the log, the
    metrics, /v1/models); a model named on aiayn's and OpenAI's routes loads there too."""
    from aiayn.serve.models import ModelSpec

    extra = [ModelSpec(model_dirs["lm"], "lm"), ModelSpec(model_dirs["classifier"], "sentiment")]
    c = started(pairs_app(pair_dirs, extra))
    try:
        listed = models(c)
        assert {m["loaded"] for m in listed.values()} == {False} and loaded(c) == set()
        assert listed["de-en"]["languages"] == ["de", "en"] and listed["de-en"]["loads"] == 0
        assert listed["sentiment"]["labels"] == ["neg", "neutral", "pos"]
        assert listed["de-en"]["parameters"] is None  # known once loaded

        translate(c, "Das Buch ist gut.", "de", "en")
        assert loaded(c) == {"de-en"}
        entry = models(c)["de-en"]
        assert entry["loaded"] and entry["loads"] == 1 and entry["load_seconds"] > 0
        assert entry["parameters"] > 0
        assert sample(c, "aiayn_model_loads_total", {"model": "de-en"}) == 1
        assert sample(c, "aiayn_model_load_seconds", {"model": "de-en"}) > 0
        assert sample(c, "aiayn_models_loaded") == 1

        r = c.post("/v1/attention", json={"model": "en-fr", "text": "The book."})
        assert r.status_code == 200 and r.json()["model"] == "en-fr"
        r = c.post("/v1/completions", json={"model": "lm", "prompt": "the", "max_tokens": 3})
        assert r.status_code == 200 and r.json()["model"] == "lm"
        r = c.post("/v1/classify", json={"input": "gut"})
        assert r.status_code == 200 and r.json()["model"] == "sentiment"
        assert loaded(c) == {"de-en", "en-fr", "lm", "sentiment"}  # en-es: never asked for
        assert models(c)["en-es"]["loaded"] is False
        text = c.get("/metrics").text
        assert 'aiayn_model_loads_total{model="lm"} 1.0' in text
    finally:
        c.__exit__(None, None, None)


def test_concurrent_first_requests_load_a_pair_once(pair_dirs, monkeypatch):
    """Eight requests for a pair not loaded, at once: one load (off the event loop: the
    server answers /health meanwhile), every request answered with its translation."""
    import aiayn.serve.registry as registry_module

    built: list[str] = []
    loading = threading.Event()
    real = registry_module.ServedModel

    def slow(spec, **options):
        built.append(spec.name)
        loading.set()
        time.sleep(0.5)  # the other requests arrive while it loads
        return real(spec, **options)

    monkeypatch.setattr(registry_module, "ServedModel", slow)
    c = started(pairs_app(pair_dirs))
    try:
        answers: list = [None] * 8
        barrier = threading.Barrier(len(answers))

        def ask(i: int) -> None:
            barrier.wait()
            answers[i] = c.post(
                "/translate", json={"q": "Das Buch ist gut.", "source": "de", "target": "en"}
            )

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(answers))]
        for t in threads:
            t.start()
        assert loading.wait(10)
        assert c.get("/health").status_code == 200  # the event loop is free while it loads
        for t in threads:
            t.join(60)
        assert [r.status_code for r in answers] == [200] * 8
        assert len({r.json()["translatedText"] for r in answers}) == 1
        assert built == ["de-en"] and models(c)["de-en"]["loads"] == 1
    finally:
        c.__exit__(None, None, None)


def test_max_loaded_one_unloads_the_least_recently_used(client, pair_dirs):
    """--max-loaded 1 with requests alternating between pairs (a pivot among them): each
    answer is the one an unbounded server gives, one model stays loaded, and every switch
    is a load (counted) and an unload."""
    asks = [("de", "en"), ("en", "fr"), ("de", "en"), ("en", "fr"), ("de", "fr")]
    want = [translate(client, GERMAN if s == "de" else "The book.", s, t) for s, t in asks]
    c = started(pairs_app(pair_dirs, max_loaded=1))
    try:
        for (source, target), expected in zip(asks, want, strict=True):
            q = GERMAN if source == "de" else "The book."
            assert translate(c, q, source, target) == expected
            assert len(settled(c, 1)) == 1
        assert settled(c, 1) == {"en-fr"}  # the pivot's second model, used last
        listed = models(c)
        assert (listed["de-en"]["loads"], listed["en-fr"]["loads"], listed["en-es"]["loads"]) == (
            3,
            3,
            0,
        )
        assert sample(c, "aiayn_model_unloads_total", {"model": "de-en"}) == 3
        assert sample(c, "aiayn_model_unloads_total", {"model": "en-fr"}) == 2
    finally:
        c.__exit__(None, None, None)


def test_requests_in_flight_survive_unloading(client, pair_dirs):
    """--max-loaded 1 under concurrent requests for two pairs: a model a request holds is
    never unloaded under it (more stay loaded meanwhile); every answer is right."""
    want = {
        ("de", "en"): translate(client, "Das Buch ist gut.", "de", "en"),
        ("en", "es"): translate(client, "The book is good.", "en", "es"),
    }
    c = started(pairs_app(pair_dirs, max_loaded=1))
    try:
        got: list = []

        def ask(pair) -> None:
            for _ in range(6):
                q = "Das Buch ist gut." if pair[0] == "de" else "The book is good."
                r = c.post("/translate", json={"q": q, "source": pair[0], "target": pair[1]})
                got.append((pair, r.status_code, r.json()))

        threads = [threading.Thread(target=ask, args=(pair,)) for pair in want for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(got) == 24
        assert all(status == 200 and body == want[pair] for pair, status, body in got)
        assert len(settled(c, 1)) == 1  # once none holds them, one stays
    finally:
        c.__exit__(None, None, None)


@pytest.mark.parametrize(
    ("preload", "max_loaded", "expected"),
    [
        ("all", 0, {"de-en", "en-fr", "en-es"}),
        ("all", 2, {"de-en", "en-fr"}),  # the first --max-loaded
        ("auto", 0, set()),  # several pairs: each on first use
        ("none", 0, set()),
    ],
)
def test_preload_loads_at_start(pair_dirs, preload, max_loaded, expected):
    c = started(pairs_app(pair_dirs, preload=preload, max_loaded=max_loaded))
    try:
        assert loaded(c) == expected
    finally:
        c.__exit__(None, None, None)


def test_one_pair_loads_at_start_unless_preload_none(pair_dirs):
    """A server of one pair (and other models) loads them all at start, as before: /health
    says ok once the first request pays no load; --preload none defers it too."""
    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    spec = ModelSpec(pair_dirs["de-en"], "de-en", engine="torch")
    for preload, expected in (("auto", {"de-en"}), ("none", set())):
        c = started(create_app([spec], ServeConfig(preload=preload)))
        try:
            assert loaded(c) == expected
            translate(c, "Das Buch ist gut.", "de", "en")
            assert loaded(c) == {"de-en"}
        finally:
            c.__exit__(None, None, None)


def test_the_serve_command_takes_the_pair_flags():
    from aiayn.cli import build_parser
    from aiayn.serve.config import ServeConfig

    parse = build_parser().parse_args
    args = parse(["serve", "a", "b", "--max-loaded", "2", "--preload", "none"])
    assert (args.max_loaded, args.preload) == (2, "none")
    assert (parse(["serve", "a"]).max_loaded, parse(["serve", "a"]).preload) == (0, "auto")
    with pytest.raises(ValueError, match="preload: 'some'; one of auto, all, none"):
        ServeConfig(preload="some")
    with pytest.raises(ValueError, match="max_loaded must be >= 0"):
        ServeConfig(max_loaded=-1)


# --- routes between languages -------------------------------------------------------------


def test_routes_pivot_through_english_first_then_the_first_language_that_joins():
    from aiayn.serve.pairs import Pairs, Route

    pairs = Pairs([("fr-de", ("fr", "de")), ("de-it", ("de", "it")), ("fr-en", ("fr", "en")),
                   ("en-it", ("en", "it")), ("it-nl", ("it", "nl"))])  # fmt: skip
    assert pairs.route("fr", "it") == Route("fr", "it", ("fr-en", "en-it"), "en")
    assert pairs.route("de", "nl") == Route("de", "nl", ("de-it", "it-nl"), "it")
    assert pairs.route("fr", "de") == Route("fr", "de", ("fr-de",))  # served directly
    assert pairs.route("fr", "nl") is None  # two pivots: not a route
    assert pairs.route("fr", "fr") is None
    assert pairs.targets("fr") == ["fr", "de", "it", "en"]
    assert pairs.sources("it") == ["fr", "de", "en"]
    assert pairs.sources("it", direct=True) == ["de", "en"]


def test_pivoted_n_best_ranks_by_the_summed_scores_without_repeats():
    from aiayn.serve.pairs import pivoted

    first = [[("a", -1.0), ("b", -2.0)], [("c", -0.5)]]
    second = [
        [("x", -3.0), ("y", -3.5)],  # a's: -4.0, -4.5
        [("x", -0.5), ("z", -1.0)],  # b's: -2.5 (x again, better), -3.0
        [("w", -0.1), ("v", -0.2)],
    ]
    assert pivoted(first, second, 3) == [
        [("x", -2.5), ("z", -3.0), ("y", -4.5)],
        [("w", -0.6), ("v", -0.7)],
    ]
    assert pivoted([[("a", float("nan"))]], [[("x", float("nan"))]], 1)[0][0][0] == "x"
    with pytest.raises(ValueError, match="2 second hypotheses lists for 1"):
        pivoted([[("a", 0.0)]], [[("x", 0.0)], [("y", 0.0)]], 1)


def test_an_unloaded_model_is_freed(pair_dirs):
    """Unloading frees the model: nothing the server keeps (queues, metrics, the requests
    answered) holds on to it."""
    import gc
    import weakref

    c = started(pairs_app(pair_dirs, max_loaded=1))
    try:
        translate(c, "Das Buch ist gut.", "de", "en")
        served = weakref.ref(c.app.state.registry.models["de-en"])
        assert served() is not None
        translate(c, "The book is good.", "en", "fr")
        assert settled(c, 1) == {"en-fr"}
        gc.collect()
        assert served() is None
    finally:
        c.__exit__(None, None, None)


def test_a_model_that_fails_to_load_is_a_500_naming_it_and_is_tried_again(pair_dirs, tmp_path):
    import shutil

    from aiayn.modeldir import WEIGHTS_FILE

    dirs = {name: shutil.copytree(path, tmp_path / name) for name, path in pair_dirs.items()}
    weights = dirs["en-fr"] / WEIGHTS_FILE
    good = weights.read_bytes()
    c = started(pairs_app(dirs))
    try:
        weights.write_bytes(b"not weights")  # after the start's checks, before its first use
        r = c.post("/translate", json={"q": "The book.", "source": "en", "target": "fr"})
        assert r.status_code == 500
        assert r.json()["error"].startswith("model en-fr could not be loaded: ")
        assert translate(c, "Das Buch.", "de", "en")["translatedText"]  # the others work
        assert c.get("/health").status_code == 200 and loaded(c) == {"de-en"}
        weights.write_bytes(good)
        assert translate(c, "The book.", "en", "fr")["translatedText"]  # tried again
        assert models(c)["en-fr"]["loads"] == 1
    finally:
        c.__exit__(None, None, None)
