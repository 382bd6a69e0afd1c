"""Glossaries over HTTP: ``aiayn serve --glossary FILE`` and a request's ``glossary`` on
LibreTranslate's ``/translate`` (an extension) and ``/v1/translate``; bad ones are 422s
naming the field."""

import json
import uuid

import pytest

from aiayn.errors import UserError
from tests.serve.conftest import make_client, wait_ready

TEXTS = ["Die Schraube ist locker.", "Das Haus ist alt."]


@pytest.fixture(scope="module")
def client(model_dirs, tmp_path_factory):
    path = tmp_path_factory.mktemp("glossary") / "terms.json"
    path.write_text(json.dumps({"de_en": {"Schraube": "bolt"}, "fr_en": {"vis": "screw"}}))
    with make_client({"de-en": model_dirs["translator"]}, glossary=str(path)) as c:
        wait_ready(c)
        yield c


def test_the_servers_glossary_applies_to_every_request(client):
    r = client.post("/translate", json={"q": TEXTS, "source": "de", "target": "en"})
    assert r.status_code == 200, r.text
    assert "bolt" in r.json()["translatedText"][0]
    r = client.post("/v1/translate", json={"text": TEXTS, "beam": 2})
    assert "bolt" in r.json()["translations"][0]["text"]


def test_the_servers_glossary_applies_to_documents_too(client):
    pytest.importorskip("docx")
    upload = {"file": ("note.txt", "\n".join(TEXTS).encode(), "text/plain")}
    r = client.post("/translate_file", data={"source": "de", "target": "en"}, files=upload)
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    text = client.get(url[url.index("/download_file/") :]).text
    assert "bolt" in text.splitlines()[0]


def test_a_requests_terms_join_the_servers_off_the_event_loop(client, monkeypatch):
    """Their expression is made anew for each request's terms, in time growing with the
    server's glossary (a second for 100,000 terms), which every other client waited for."""
    import asyncio

    import aiayn.serve.terminology as serving

    made_in_loop = []

    class Recorded(serving.Terms):
        def __init__(self, table):
            try:
                asyncio.get_running_loop()
                made_in_loop.append(True)
            except RuntimeError:  # a worker thread's
                made_in_loop.append(False)
            super().__init__(table)

    monkeypatch.setattr(serving, "Terms", Recorded)
    for path, body in (
        ("/translate", {"q": TEXTS[1], "source": "de", "target": "en"}),
        ("/v1/translate", {"text": TEXTS[1]}),  # aiayn's route: the model has the languages
    ):
        body["glossary"] = {uuid.uuid4().hex: "x"}  # terms not made before (none cached)
        r = client.post(path, json=body)
        assert r.status_code == 200, r.text
    assert made_in_loop == [False, False]


def test_the_servers_glossary_is_read_once_at_start(model_dirs, tmp_path):
    """Read when the app is made (a bad file fails then), never again: a file that is gone
    later (a pipe, a rotated file) still gives its terms."""
    path = tmp_path / "terms.json"
    path.write_text(json.dumps({"de_en": {"Schraube": "bolt"}}))
    with make_client({"de-en": model_dirs["translator"]}, glossary=str(path)) as c:
        wait_ready(c)
        path.unlink()
        r = c.post("/translate", json={"q": TEXTS[0], "source": "de", "target": "en"})
        assert r.status_code == 200 and "bolt" in r.json()["translatedText"], r.text
    path.write_text("{")
    with pytest.raises(UserError, match="terms.json"):
        make_client({"de-en": model_dirs["translator"]}, glossary=str(path))


def test_a_requests_glossary_adds_to_the_servers(client):
    glossary = {"Haus": "shed"}
    r = client.post(
        "/translate", json={"q": TEXTS, "source": "de", "target": "en", "glossary": glossary}
    )
    assert r.status_code == 200, r.text
    first, second = r.json()["translatedText"]
    assert "bolt" in first and "shed" in second
    r = client.post("/v1/translate", json={"text": TEXTS[1], "glossary": glossary})
    assert "shed" in r.json()["translations"][0]["text"]


def test_a_form_body_carries_the_glossary_as_json(client):
    form = {"q": TEXTS[1], "source": "de", "target": "en", "glossary": '{"Haus": "shed"}'}
    r = client.post("/translate", data=form)
    assert r.status_code == 200, r.text
    assert "shed" in r.json()["translatedText"]


@pytest.mark.parametrize(
    ("glossary", "message"),
    [
        ({"Haus": ""}, "glossary"),
        ({"Haus": " "}, "glossary"),
        ({"de_en": {"Haus": "house"}}, "glossary"),
        ({"Haus": 3}, "glossary"),
        ("[1, 2]", "glossary"),
        ({f"t{i}": "x" for i in range(1001)}, "glossary"),
        ({f"t{i}": "x" * 200 for i in range(500)}, "characters of terms"),  # 102,000 in all
    ],
    ids=str,
)
def test_a_bad_glossary_is_refused_naming_it(client, glossary, message):
    """422 on aiayn's route, LibreTranslate's 400 on its own."""
    for path, body, status in (
        ("/translate", {"q": TEXTS[1], "source": "de", "target": "en"}, 400),
        ("/v1/translate", {"text": TEXTS[1]}, 422),
    ):
        r = client.post(path, json={**body, "glossary": glossary})
        assert r.status_code == status, r.text
        error = r.json()["error"]  # LibreTranslate's: the message; aiayn's: an object
        assert message in (error if isinstance(error, str) else error["message"])


@pytest.mark.parametrize("written", ["Schraube", "SCHRAUBE", "schraube"])
def test_a_requests_term_replaces_the_servers_however_either_is_written(client, written):
    """The server's "Schraube" -> "bolt" gives way to the request's term for the same word
    whatever its case (it lost when its spelling sorted first)."""
    body = {"q": TEXTS[0], "source": "de", "target": "en", "glossary": {written: "screw"}}
    r = client.post("/translate", json=body)
    assert r.status_code == 200, r.text
    assert "screw" in r.json()["translatedText"] and "bolt" not in r.json()["translatedText"]


def test_a_request_giving_one_term_two_targets_is_refused(client):
    body = {"q": TEXTS[0], "source": "de", "target": "en"}
    r = client.post("/translate", json={**body, "glossary": {"Haus": "shed", "haus": "hut"}})
    assert r.status_code == 400, r.text
    assert '"haus" -> "hut", but "Haus" -> "shed" already' in r.json()["error"]


@pytest.fixture(scope="module")
def keeping(model_dirs):
    with make_client(
        {"de-en": model_dirs["translator"]}, keep_placeholders=True, keep=r"ACME\w*"
    ) as c:
        wait_ready(c)
        yield c


def test_the_server_keeps_placeholders_on_every_route(keeping):
    """``aiayn serve --keep-placeholders --keep REGEX``: a LibreTranslate client sending UI
    strings got "Date % are sufficient." for "Datei %s gelöscht." (the server had no way to
    keep them)."""
    texts = ["Datei %s gelöscht.", "Hallo {{name}}, ACMEdrive ist da."]
    spans = [["%s"], ["{{name}}", "ACMEdrive"]]
    r = keeping.post("/translate", json={"q": texts, "source": "de", "target": "en"})
    assert r.status_code == 200, r.text
    for out, kept in zip(r.json()["translatedText"], spans, strict=True):
        assert all(s in out for s in kept), out
    r = keeping.post("/v1/translate", json={"text": texts[1]})
    assert all(s in r.json()["translations"][0]["text"] for s in spans[1]), r.text
    body = {"q": f"<p>{texts[0]}</p>", "source": "de", "target": "en", "format": "html"}
    r = keeping.post("/translate", json=body)
    assert "%s" in r.json()["translatedText"], r.text
    upload = {"file": ("note.txt", texts[1].encode(), "text/plain")}
    r = keeping.post("/translate_file", data={"source": "de", "target": "en"}, files=upload)
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    out = keeping.get(url[url.index("/download_file/") :]).text
    assert all(s in out for s in spans[1]), out


def test_a_kept_span_holding_a_sentence_end_is_not_cut(keeping):
    """LibreTranslate's /translate cuts a text into sentences: "{% trans 'Hallo!' %}" was cut
    after "'Hallo!'", and kept in neither sentence (/v1/translate, given the text whole, kept
    it)."""
    for span in ("{% trans 'Hallo!' %}", "{{ Name! }}"):
        text = f"Bitte {span} lesen. Danke."
        r = keeping.post("/translate", json={"q": text, "source": "de", "target": "en"})
        assert r.status_code == 200, r.text
        assert span in r.json()["translatedText"], r.text


def test_a_bad_keep_expression_is_refused_naming_it():
    from aiayn.serve.config import ServeConfig

    with pytest.raises(ValueError, match=r"keep: '\(x' is not a regular expression"):
        ServeConfig(keep="(x")


def test_a_ctranslate2_server_names_itself_when_asked_for_terms(model_dirs, tmp_path):
    """Its answer told the client to "decode with engine 'torch'", which no client can do."""
    pytest.importorskip("ctranslate2")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    path = model_dirs["translator"]
    spec = ModelSpec(path, "de-en", engine="ctranslate2", cache_dir=tmp_path)
    with TestClient(create_app([spec], ServeConfig(), background=False)) as c:
        body = {"q": TEXTS[0], "source": "de", "target": "en"}
        assert c.post("/translate", json=body).status_code == 200
        r = c.post("/translate", json={**body, "glossary": {"Schraube": "bolt"}})
        assert r.status_code == 400, r.text
        assert "aiayn serve --engine ctranslate2" in r.json()["error"]
        empty = c.post("/translate", json={**body, "glossary": {}})
        assert empty.status_code == 200, empty.text
        # and its OpenAPI document says so: a generated client sends no terms
        document = c.get("/openapi.json").json()
        for path in ("/translate", "/v1/translate"):
            schema = document["paths"][path]["post"]["requestBody"]["content"]
            schema = schema["application/json"]["schema"]
            if "$ref" in schema:
                schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
            glossary = schema["properties"]["glossary"]
            assert {"type": "object", "maxProperties": 0} in glossary["anyOf"], path
            assert "CTranslate2" in glossary["description"]


def test_the_server_glossarys_terms_are_made_as_its_model_loads(model_dirs, tmp_path):
    """Not by the first request, on the event loop: a glossary of 100,000 terms took 1.7 s
    to make, every client waiting."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    path = tmp_path / "terms.tsv"
    path.write_text("de\ten\nSchraube\tbolt\n")
    spec = ModelSpec(model_dirs["translator"], "de-en")
    app = create_app([spec], ServeConfig(glossary=str(path)), background=False)
    with TestClient(app) as c:
        assert c.get("/health").status_code == 200
        made = app.state.glossary._made  # no request yet
        assert list(made) == [("de", "en")] and made[("de", "en")].targets == {"schraube": "bolt"}


def test_a_server_glossary_giving_a_term_two_targets_fails_the_start_naming_its_line(
    model_dirs, tmp_path
):
    """Its last line silently won; now the models do not load, and every request says why
    (aiayn serve stops with it). A pair no model uses (en_de: bolt <- Schraube, Bolzen) is
    no error."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    path = tmp_path / "terms.tsv"
    path.write_text("de\ten\nSchraube\tbolt\nBolzen\tbolt\n")
    spec = ModelSpec(model_dirs["translator"], "de-en")
    config = ServeConfig(glossary=str(path))
    with TestClient(create_app([spec], config, background=False)) as c:
        assert c.get("/health").status_code == 200
    path.write_text("de\ten\nSchraube\tbolt\nBolzen\tbolt\nschraube\tscrew\n")
    with TestClient(create_app([spec], config, background=False)) as c:
        assert c.get("/health").status_code != 200
        r = c.post("/translate", json={"q": TEXTS[0], "source": "de", "target": "en"})
        assert r.status_code == 500, r.text
        expected = 'terms.tsv: line 4: "schraube" -> "screw", but "Schraube" -> "bolt"'
        assert "failed to load" in r.json()["error"] and expected in r.json()["error"]


def test_a_documents_request_glossary_is_used_not_ignored(client):
    """/translate_file took no glossary: a client's terms were silently dropped there."""
    upload = {"file": ("note.txt", TEXTS[1].encode(), "text/plain")}
    form = {"source": "de", "target": "en", "glossary": '{"Haus": "shed"}'}
    r = client.post("/translate_file", data=form, files=upload)
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    assert "shed" in client.get(url[url.index("/download_file/") :]).text
    r = client.post("/translate_file", data={**form, "glossary": '{"Haus": ""}'}, files=upload)
    assert r.status_code == 400 and "glossary" in r.json()["error"], r.text


def test_v1_translate_names_what_a_translation_lacks(client):
    """Hypothesis.unmet reached no client: a term cut off by the length limit went unsaid."""
    long = "sunshine and rain and snow and wind and hail"
    body = {"text": "Schraube", "glossary": {"Schraube": long}, "max_len_offset": 1}
    r = client.post("/v1/translate", json=body)
    assert r.status_code == 200, r.text
    (t,) = r.json()["translations"]
    assert t["unmet"] == [long] and long not in t["text"]
    r = client.post("/v1/translate", json={"text": TEXTS[0], "beam": 2})
    assert r.json()["translations"][0]["unmet"] == []


def glossary_of(chars: int, seed: int, term_chars: int = 470) -> dict[str, str]:
    """Terms of random words, about ``chars`` characters in all (source and target terms of
    about ``term_chars`` each), none like another glossary's of another ``seed``."""
    import random
    import string

    rng = random.Random(seed)

    def term() -> str:
        words = []
        while sum(len(w) + 1 for w in words) < term_chars:
            words.append("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))))
        return " ".join(words)[:term_chars].strip()

    terms: dict[str, str] = {}
    while sum(len(s) + len(t) for s, t in terms.items()) + 2 * term_chars + 8 < chars:
        terms[f"{seed}.{len(terms)} {term()}"] = term()
    return terms


def health_while(port: int, bodies: list[bytes], every: float = 0.05) -> tuple[list, list]:
    """The seconds each ``/health`` took while ``bodies`` were posted to ``/translate`` at
    once (a probe sent every ``every`` seconds on a connection of its own, whether the ones
    before were answered or not, at least one, until every post is answered), and the posts'
    answers."""
    import http.client
    import threading
    import time

    answers: list = []
    seconds: list = []

    def send(body: bytes) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        answers.append((response.status, json.loads(response.read())))

    def probe() -> None:
        start = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
        seconds.append(time.perf_counter() - start)

    posts = [threading.Thread(target=send, args=(body,)) for body in bodies]
    for post in posts:
        post.start()
    probes: list = []
    while not probes or any(post.is_alive() for post in posts):
        probes.append(threading.Thread(target=probe))
        probes[-1].start()
        time.sleep(every)
    for thread in posts + probes:
        thread.join(120)
    assert len(seconds) == len(probes) and len(answers) == len(bodies)
    return seconds, answers


def test_health_answers_while_requests_glossaries_are_made(model_dirs):
    """A request's glossary is compiled off the event loop (and its size bounded): /health
    answers within 0.1 s while four requests bring a 900 KB glossary each (refused: over
    100,000 characters), and while four bring glossaries at the limit, each compiled in about a
    fifth of a second, one at a time in a thread. Measured as the median of the probes: on a
    2-core host shared with other work, any one probe may wait tens of milliseconds for a core
    (or for the interpreter's lock, which the compiling thread holds 5 ms at a time); on the
    event loop, a compile held every probe for the rest of it."""
    import statistics

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec
    from aiayn.serve.schemas import MAX_GLOSSARY_CHARS
    from tests.serve.conftest import live_server

    def body(glossary: dict) -> bytes:
        return json.dumps(
            {"q": TEXTS[1], "source": "de", "target": "en", "glossary": glossary}
        ).encode()

    huge = [body(glossary_of(900_000, seed)) for seed in range(4)]
    assert all(850_000 < len(b) < 1_000_000 for b in huge)
    fits = [body(glossary_of(MAX_GLOSSARY_CHARS, seed)) for seed in range(4, 8)]
    app = create_app(
        [ModelSpec(model_dirs["translator"], "de-en")], ServeConfig(), background=False
    )
    with live_server(app) as port:
        refused, answers = health_while(port, huge)
        print("refused:", refused)  # pytest -s shows them
        assert statistics.median(refused) < 0.1, refused
        assert [status for status, _ in answers] == [400] * 4, answers[0]
        assert f"at most {MAX_GLOSSARY_CHARS}" in answers[0][1]["error"]
        made, answers = health_while(port, fits)
        print("made:", made)
        assert statistics.median(made) < 0.1 and len(made) >= 5, made
        assert [status for status, _ in answers] == [200] * 4, answers[0]


def test_terms_are_kept_by_their_tables_content_and_the_cache_is_bounded():
    from aiayn.serve.terminology import TermsCache

    cache = TermsCache(entries=2, chars=40)
    first = cache.terms({"Haus": "house", "Baum": "tree"})
    assert cache.terms({"Baum": "tree", "Haus": "house"}) is first  # the same terms, in any order
    assert cache.terms({"Haus": "home", "Baum": "tree"}) is not first  # another target
    cache.terms({"Tür": "door"})  # a third: the least recently used goes
    assert len(cache) == 2
    assert cache.terms({"Haus": "house", "Baum": "tree"}) is not first
    big = cache.terms({"x" * 30: "y" * 30})  # over the characters alone: kept, the others go
    assert len(cache) == 1 and cache.terms({"x" * 30: "y" * 30}) is big
