"""LibreTranslate's own API tests (its repository's libretranslate/tests/test_api), asked of
aiayn serve over HTTP with German-English instead of English-Spanish; then the rest of its
surface: /frontend/settings, /suggest, limits in its words, CORS, texts with nothing to
translate."""

import sqlite3

import pytest

from tests.serve.conftest import make_client, wait_ready

pytest.importorskip("fastapi")

# --- test_api_detect_language.py


def test_api_detect_language(client):
    response = client.post("/detect", data={"q": "Hallo"})
    body = response.json()
    assert "confidence" in body[0] and "language" in body[0]
    assert len(body) >= 1
    assert response.status_code == 200


def test_api_detect_language_must_fail_without_parameters(client):
    response = client.post("/detect")
    assert "error" in response.json()
    assert response.status_code == 400


def test_api_detect_language_must_fail_bad_request_type(client):
    assert client.get("/detect").status_code == 405


# --- test_api_frontend_settings.py


def test_api_get_frontend_settings(client):
    assert client.get("/frontend/settings").status_code == 200


# --- test_api_get_languages.py


def test_api_get_languages(client):
    response = client.get("/languages")
    body = response.json()
    assert "code" in body[0] and "name" in body[0]
    assert len(body) >= 1
    assert response.status_code == 200


def test_api_get_languages_must_fail_bad_request_type(client):
    assert client.post("/languages").status_code == 405


# --- test_api_health.py


def test_api_get_health(client):
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_api_health_must_fail_bad_request_type(client):
    assert client.post("/health").status_code == 405


# --- test_api_spec.py


def test_api_get_spec(client):
    response = client.get("/spec")
    assert response.status_code == 200
    assert "/translate" in response.json()["paths"]


def test_api_get_spec_must_fail_bad_request_type(client):
    assert client.post("/spec").status_code == 405


# --- test_api_translate.py


def test_api_translate(client):
    response = client.post(
        "/translate", data={"q": "Hallo", "source": "de", "target": "en", "format": "text"}
    )
    assert "translatedText" in response.json()
    assert response.status_code == 200


def test_api_translate_batch(client):
    response = client.post(
        "/translate",
        json={"q": ["Hallo", "Welt"], "source": "de", "target": "en", "format": "text"},
    )
    body = response.json()
    assert isinstance(body["translatedText"], list) and len(body["translatedText"]) == 2
    assert response.status_code == 200


def test_api_translate_unsupported_language(client):
    response = client.post(
        "/translate", data={"q": "Hallo", "source": "de", "target": "zz", "format": "text"}
    )
    assert response.json()["error"] == "zz is not supported"
    assert response.status_code == 400


def test_api_translate_missing_parameter(client):
    response = client.post("/translate", data={"source": "de", "target": "en", "format": "text"})
    assert response.json()["error"] == "Invalid request: missing q parameter"
    assert response.status_code == 400


# --- the rest of LibreTranslate's surface


@pytest.mark.parametrize("text", ["😀", "42", "3,14 %", "https://example.org/a?b=1", "a@b.de"])
def test_a_text_with_nothing_to_translate_comes_back_as_it_came(client, text):
    r = client.post("/translate", json={"q": text, "source": "auto", "target": "en"})
    assert r.status_code == 200
    assert r.json() == {
        "translatedText": text,
        "detectedLanguage": {"language": "de", "confidence": 0.0},
    }
    r = client.post(
        "/translate",
        json={"q": ["Hallo", text, "Welt"], "source": "de", "target": "en", "alternatives": 1},
    )
    alone = client.post(
        "/translate",
        json={"q": ["Hallo", "Welt"], "source": "de", "target": "en", "alternatives": 1},
    ).json()
    body, words, others = r.json(), alone["translatedText"], alone["alternatives"]
    assert body["translatedText"] == [words[0], text, words[1]]
    assert body["alternatives"] == [others[0], [], others[1]]


def test_detect_takes_a_list_and_answers_one_ranking_for_it(client):
    # LibreTranslate answers a list of texts with one list of languages, the most used first
    texts = ["Ich habe heute keine Zeit.", "Hello", "Das Wetter ist schön."]
    r = client.post("/detect", json={"q": texts})
    assert r.status_code == 200
    assert [x["language"] for x in r.json()] == ["de", "en"]
    assert all(0 < x["confidence"] <= 100 for x in r.json())


def test_frontend_settings_fields(client):
    from aiayn import documents

    settings = client.get("/frontend/settings").json()
    assert settings == {
        "charLimit": 2000,
        "frontendTimeout": 500,
        "apiKeys": False,
        "keyRequired": False,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": documents.supported_formats(),
        "language": {
            "source": {"code": "auto", "name": "Auto Detect"},  # one source: auto is it
            "target": {"code": "en", "name": "English"},
        },
    }
    assert {".txt", ".docx", ".odt", ".pptx", ".epub", ".srt", ".po", ".html"} <= set(
        settings["supportedFilesFormat"]
    )


def test_suggest_is_403_without_suggestions(client):
    body = {"q": "Hallo", "s": "Hello", "source": "de", "target": "en"}
    r = client.post("/suggest", data=body)
    assert r.status_code == 403 and r.json() == {
        "error": "Suggestions are disabled on this server."
    }


def test_suggestions_are_stored(model_dirs, tmp_path):
    from aiayn.serve.config import FrontendConfig

    db = tmp_path / "s.db"
    frontend = FrontendConfig(suggestions=True, suggestions_db=str(db))
    with make_client({"t": model_dirs["translator"]}, frontend=frontend) as c:
        wait_ready(c)
        assert c.get("/frontend/settings").json()["suggestions"] is True
        r = c.post("/suggest", data={"q": "Hallo", "s": "Hello", "source": "de", "target": "en"})
        assert r.status_code == 200 and r.json() == {"success": True}
        r = c.post("/suggest", json={"q": "Welt", "s": "World", "source": "de", "target": "en"})
        assert r.status_code == 200
        r = c.post("/suggest", json={"q": "Welt", "source": "de", "target": "en"})
        assert r.status_code == 400 and r.json() == {
            "error": "Invalid request: missing s parameter"
        }
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT q, s, source, target FROM suggestions ORDER BY rowid").fetchall()
    assert rows == [("Hallo", "Hello", "de", "en"), ("Welt", "World", "de", "en")]


def test_limits_in_libretranslates_words(model_dirs):
    from aiayn.serve.config import FrontendConfig

    frontend = FrontendConfig(alternatives_limit=1, disable_web_ui=True)
    with make_client(
        {"t": model_dirs["translator"]}, frontend=frontend, max_texts=2, max_chars=5
    ) as c:
        wait_ready(c)
        r = c.post("/translate", json={"q": ["a", "b", "c"], "source": "de", "target": "en"})
        assert r.status_code == 400
        assert r.json() == {"error": "Invalid request: request (3) exceeds text limit (2)"}
        r = c.post("/translate", json={"q": "Hallo Welt", "source": "de", "target": "en"})
        assert r.json() == {"error": "Invalid request: request (10) exceeds text limit (5)"}
        r = c.post(
            "/translate", json={"q": "Ja", "source": "de", "target": "en", "alternatives": 2}
        )
        assert r.json() == {"error": "Invalid request: alternatives parameter must be <= 1"}
        assert c.post(
            "/translate", json={"q": "Ja", "source": "de", "target": "en", "alternatives": 1}
        ).is_success
        assert c.get("/").status_code == 404  # --disable-web-ui
        assert c.get("/frontend/settings").json()["charLimit"] == 5
        assert c.get("/openapi.json").json()["paths"]["/translate"]


def test_cors_headers_as_libretranslate_sends_them(client):
    for r in (
        client.post("/translate", json={"q": "Ja", "source": "de", "target": "en"}),
        client.post("/translate", json={"q": "Ja", "source": "de", "target": "zz"}),
        client.get("/v1/models"),
    ):
        assert r.headers["access-control-allow-origin"] == "*"
        assert r.headers["access-control-allow-headers"] == "Authorization, Content-Type"
        assert r.headers["access-control-allow-methods"] == "GET, POST"
        assert r.headers["access-control-max-age"] == str(60 * 60 * 24 * 20)
    preflight = client.options(
        "/translate",
        headers={"Origin": "https://x.example", "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "*"


# --- a JSON /translate is answered before FastAPI's routing (TranslateLane), a form by the route


@pytest.mark.parametrize(
    "fields",
    [
        {"q": "Hallo Welt", "source": "de", "target": "en"},
        {"q": ["Hallo", "Welt"], "source": "auto", "target": "en", "alternatives": "1"},
        {"q": "<p>Hallo <b>Welt</b></p>", "source": "de", "target": "en", "format": "html"},
        {"q": "🙂", "source": "de", "target": "en"},
        {"q": "Hallo", "source": "de", "target": "zz"},
        {"source": "de", "target": "en"},
        {"q": "Hallo", "source": "de", "target": "en", "format": "xml"},
        {"q": "Hallo", "source": "de", "target": "en", "alternatives": "-1"},
        {"q": "Hallo", "source": "de", "target": "en", "alternatives": "99"},
    ],
)
def test_a_json_body_is_answered_as_the_same_form(client, fields):
    as_json = {k: int(v) if k == "alternatives" else v for k, v in fields.items()}
    by_lane = client.post("/translate", json=as_json)
    by_route = client.post("/translate", data=fields)
    assert by_lane.status_code == by_route.status_code
    assert by_lane.json() == by_route.json()
    assert by_lane.headers["content-type"] == by_route.headers["content-type"]
    assert by_lane.headers["access-control-allow-origin"] == "*"


def test_a_json_translation_skips_fastapis_routing_and_counts_as_the_route(model_dirs):
    from aiayn.serve.access import AccessConfig

    with make_client(model_dirs, access=AccessConfig(metrics=True, metrics_open=True)) as c:
        wait_ready(c)
        routed = []
        router = c.app.router

        class Spy:  # FastAPI's router, noting each request it routes
            def __getattr__(self, name):
                return getattr(router, name)

            async def __call__(self, scope, receive, send):
                routed.append((scope["method"], scope["path"]))
                await router(scope, receive, send)

        c.app.router = Spy()
        c.app.middleware_stack = None  # built again, over the spy
        fields = {"q": "Hallo", "source": "de", "target": "en"}
        assert c.post("/translate", json=fields).status_code == 200
        assert c.post("/translate", json={**fields, "target": "zz"}).status_code == 400
        assert routed == []
        assert c.post("/translate", data=fields).status_code == 200
        assert routed == [("POST", "/translate")]
        c.app.router = router
        c.app.middleware_stack = None
        text = c.get("/metrics").text
    assert 'aiayn_requests_total{route="/translate",status="200"} 2.0' in text
    assert 'aiayn_requests_total{route="/translate",status="400"} 1.0' in text


def test_the_translate_route_depends_on_what_the_lane_does_by_hand():
    """TranslateLane calls ``guard`` and reads the registry itself: a dependency added to the
    route must be added to the lane too."""
    from aiayn.serve.access import guard
    from aiayn.serve.routes import registry_of
    from aiayn.serve.routes.libretranslate import router

    (route,) = [r for r in router.routes if r.path == "/translate"]
    calls = {d.call for d in route.dependant.dependencies}
    assert calls == {registry_of, guard}


def test_a_body_is_a_form_or_json_alike_for_the_access_check_and_the_route(model_dirs):
    """One decision (``is_form``): a Content-Type that only starts like a form's is JSON to the
    request count and to the route alike, and a form's in capitals is a form to both."""
    from aiayn.serve.access import AccessConfig

    with make_client({"t": model_dirs["translator"]}, access=AccessConfig(req_limit=2)) as c:
        wait_ready(c)
        form = "q=a&q=b&q=c&q=d&q=e&source=de&target=en"
        r = c.post(
            "/translate",
            content=f'{{"x": "&{form}&y="}}',
            headers={"Content-Type": "application/x-www-form-urlencodedX"},
        )
        assert (r.status_code, r.json()) == (400, {"error": "Invalid request: missing q parameter"})
        r = c.post(
            "/translate",
            content=form,
            headers={"Content-Type": "Application/X-WWW-Form-Urlencoded"},
        )
        assert r.status_code == 400
        assert r.json() == {
            "error": "Invalid request: 5 texts in one request; the limit is 2 per 1 minute"
        }
        r = c.post(
            "/translate",
            content="q=Hallo&source=de&target=en",
            headers={"Content-Type": "Application/X-WWW-Form-Urlencoded"},
        )
        assert r.status_code == 200 and r.json()["translatedText"]


def test_an_integer_past_pythons_digits_is_a_400_in_the_routes_words(client):
    """It answered Python's advice to its programmer (use sys.set_int_max_str_digits())."""
    long = "1" * 5000
    body = '{"q": "Hallo", "source": "de", "target": "en", "alternatives": ' + long + "}"
    r = client.post("/translate", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    too_long = "body: a number in the JSON body is too long (over 4300 digits)"
    assert r.json() == {"error": too_long}  # LibreTranslate's error body
    assert r.headers["access-control-allow-origin"] == "*"
    body = '{"prompt": "the", "max_tokens": ' + long + "}"
    r = client.post("/v1/completions", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"] == {  # OpenAI's
        "message": too_long,
        "type": "invalid_request_error",
        "param": "body",
        "code": 400,
    }
