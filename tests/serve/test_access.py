"""API keys, request limits and /metrics' token: every route that runs a model passes through
one access check (``aiayn.serve.access``), found here by enumerating the app's routes."""

import sqlite3

import pytest

from aiayn.cli import main
from tests.serve.conftest import make_client, wait_ready

pytest.importorskip("fastapi")
pytest.importorskip("limits")

# a valid request to every route that runs a model (a new such route must be added here)
MODEL_ROUTES = {
    ("POST", "/translate"): {"q": "Ja.", "source": "de", "target": "en"},
    ("POST", "/detect"): {"q": "Ja."},
    ("POST", "/suggest"): {"q": "Ja.", "s": "Yes.", "source": "de", "target": "en"},
    ("POST", "/v1/translate"): {"text": "Ja."},
    ("POST", "/v1/attention"): {"text": "Ja."},
    ("POST", "/v1/classify"): {"input": "gut"},
    ("POST", "/v1/embeddings"): {"input": "gut"},
    ("POST", "/v1/completions"): {"prompt": "the", "max_tokens": 2},
}
# routes that run a model on an upload (multipart), checked apart below
FILE_ROUTES = {("POST", "/translate_file")}
# the routes that run no model and take no key
OPEN_ROUTES = {
    ("GET", "/download_file/{name:path}"),
    ("GET", "/"),
    ("GET", "/health"),
    ("GET", "/languages"),
    ("GET", "/frontend/settings"),
    ("GET", "/spec"),
    ("GET", "/metrics"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/{model_id:path}"),
    ("GET", "/docs"),
    ("GET", "/docs/{name}"),
    ("GET", "/openapi.json"),
}
LT = {"/translate", "/detect", "/suggest"}
# DeepL's routes, every one behind the access check (its refusals: test_deepl_routes.py)
DEEPL = ("/v2/", "/v3/")


def _routes(app):
    """(method, path, guarded) of every route of ``app``."""
    from aiayn.serve.access import guard

    out, routes = [], list(app.routes)
    while routes:
        route = routes.pop(0)
        included = getattr(route, "original_router", None)  # FastAPI's included router
        if included is not None:
            routes.extend(included.routes)
            continue
        if not getattr(route, "methods", None):
            continue
        guarded = False
        if hasattr(route, "dependant"):  # FastAPI's
            stack = list(route.dependant.dependencies)
            while stack:
                dep = stack.pop()
                guarded = guarded or dep.call is guard
                stack.extend(dep.dependencies)
        for method in sorted(route.methods - {"HEAD"}):
            out.append((method, route.path, guarded))
    return out


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """A key database: (path, {"plain": key, "slow": key with 2 requests a minute,
    "short": key with 5 characters a text})."""
    from aiayn.serve.keys import KeyStore

    path = tmp_path_factory.mktemp("keys") / "keys.db"
    store = KeyStore(path)
    made = {
        "plain": store.add()[0],
        "slow": store.add(req_limit=2)[0],
        "short": store.add("a-given-key-for-scripts", char_limit=5)[0],
    }
    store.close()
    return path, made


@pytest.fixture(scope="module")
def guarded(model_dirs, keys, tmp_path_factory):
    """The three models behind --api-keys, with suggestions stored."""
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.config import FrontendConfig

    # its tests give wrong keys on purpose, more than a minute's --key-failures-limit
    # (test_hostile.py tests that limit)
    access = AccessConfig(
        api_keys=True, api_keys_db=str(keys[0]), metrics=True, key_failures_limit=0
    )
    db = tmp_path_factory.mktemp("suggestions") / "s.db"
    frontend = FrontendConfig(suggestions=True, suggestions_db=str(db))
    with make_client(model_dirs, access=access, frontend=frontend) as c:
        wait_ready(c)
        yield c


def _batches(client) -> float:
    """Model calls made so far, over every model (the queues' batch counts)."""
    registry = client.app.state.registry
    samples = registry.metrics.registry.get_sample_value
    return sum(samples("aiayn_batch_texts_count", {"model": m}) or 0 for m in registry.models)


def test_the_key_store_keeps_digests_only(tmp_path):
    from aiayn.serve.keys import KeyStore

    store = KeyStore(tmp_path / "k.db")
    key, record = store.add(req_limit=7, name="team")
    given, _ = store.add("x" * 16, char_limit=3)
    assert len(key) >= 40 and key != store.add()[0]  # random, not repeated
    assert store.lookup(key) == record and record.req_limit == 7
    assert store.lookup(key[:-1] + "?") is None and store.lookup("") is None
    store.close()
    raw = (tmp_path / "k.db").read_bytes()
    assert key.encode() not in raw and given.encode() not in raw  # never the key itself
    store = KeyStore(tmp_path / "k.db")
    assert store.remove(record.id) == record and store.lookup(key) is None
    assert store.remove(given).char_limit == 3 and len(store.all()) == 1
    with pytest.raises(KeyError, match="no API key"):
        store.remove(given)
    for bad in ("", None, 12345):  # no text to send: no key (any other is, as LibreTranslate's)
        with pytest.raises(ValueError, match="give some text"):
            store.add(bad) if bad is not None else store.add_many([(bad, 1, None)])
    with pytest.raises(ValueError, match="req_limit"):
        store.add(req_limit=0)
    store.close()
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ValueError, match="not an API key database"):
        KeyStore(tmp_path / "junk.db")


def test_aiayn_keys_add_list_remove(tmp_path, capsys):
    db = str(tmp_path / "keys.db")
    assert main(["keys", "--db", db, "list"]) == 2
    assert "no API key database" in capsys.readouterr().err
    assert main(["keys", "--db", db, "add", "--req-limit", "30", "--name", "alice"]) == 0
    out, err = capsys.readouterr()
    key = out.strip()
    assert len(key) >= 40 and "copy it now" in err
    assert main(["keys", "--db", db, "add", "--key", "scripted-key-0123456789"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "scripted-key-0123456789" not in err  # a given key is not echoed
    assert "stored as id " in err
    assert main(["keys", "--db", db, "add", "--key", "valid-key"]) == 0  # LibreTranslate's test key
    err = capsys.readouterr().err
    assert "9 characters: shorter than 16" in err and "stored as id" in err
    assert "valid-key" not in err  # named by its length, never echoed
    assert main(["keys", "--db", db, "add", "--key", ""]) == 2
    assert "--key: key: empty" in capsys.readouterr().err
    assert main(["keys", "--db", db, "list"]) == 0
    listing = capsys.readouterr().out
    assert "alice" in listing and "\t30\t" in listing and key not in listing
    key_id = listing.splitlines()[1].split("\t")[0]
    assert main(["keys", "--db", db, "remove", key_id]) == 0
    assert main(["keys", "--db", db, "remove", "scripted-key-0123456789"]) == 0
    assert main(["keys", "--db", db, "remove", "valid-key"]) == 0
    capsys.readouterr()
    assert main(["keys", "--db", db, "list"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(*) FROM api_keys").fetchone() == (0,)


def test_every_route_is_known_and_every_model_route_is_guarded(guarded):
    routes = _routes(guarded.app)
    for method, path, is_guarded in routes:
        if path.startswith(DEEPL):
            assert is_guarded, f"{method} {path}: DeepL's routes all take its keys"
        elif (method, path) in MODEL_ROUTES.keys() | FILE_ROUTES:
            assert is_guarded, f"{method} {path} runs a model without the access check"
        else:
            assert (method, path) in OPEN_ROUTES, f"{method} {path}: add it to a table above"
            assert not is_guarded or path == "/metrics"
    assert set(MODEL_ROUTES) | FILE_ROUTES <= {(m, p) for m, p, _ in routes}


def test_no_document_translates_without_a_valid_key(guarded, keys):
    """/translate_file: LibreTranslate's 400 without a key and 403 with a wrong one, before
    the upload is read; with a key in the form, the document translates."""
    pytest.importorskip("docx")
    before = _batches(guarded)
    upload = {"file": ("note.txt", b"Ja.", "text/plain")}
    form = {"source": "de", "target": "en"}
    r = guarded.post("/translate_file", data=form, files=upload)
    assert r.status_code == 400
    assert r.json() == {"error": "Please contact the server operator to get an API key"}
    r = guarded.post("/translate_file", data={**form, "api_key": "nope" * 5}, files=upload)
    assert r.status_code == 403 and r.json() == {"error": "Invalid API key"}
    assert _batches(guarded) == before
    r = guarded.post("/translate_file", data={**form, "api_key": keys[1]["plain"]}, files=upload)
    assert r.status_code == 200 and "/download_file/" in r.json()["translatedFileUrl"]
    assert _batches(guarded) > before


def test_no_model_runs_for_a_request_without_a_valid_key(guarded, keys):
    before = _batches(guarded)
    for (method, path), body in MODEL_ROUTES.items():
        r = guarded.request(method, path, json=body)
        assert r.status_code == 400, (path, r.text)
        error = r.json()["error"]
        if path in LT:
            assert error == "Please contact the server operator to get an API key"
        else:
            assert "requires an API key" in error["message"] and error["param"] == "api_key"
        for wrong in ({"api_key": "nope" * 5}, {}):
            headers = {} if wrong else {"Authorization": "Bearer " + "nope" * 5}
            r = guarded.request(method, path, json={**body, **wrong}, headers=headers)
            assert r.status_code == 403, (path, r.text)
            error = r.json()["error"]
            assert error == "Invalid API key" if path in LT else "invalid API key" in str(error)
    assert _batches(guarded) == before  # no model ran
    plain = keys[1]["plain"]
    for (method, path), body in MODEL_ROUTES.items():
        r = guarded.request(method, path, json={**body, "api_key": plain})  # LibreTranslate's way
        assert r.status_code == 200, (path, r.text)
        r = guarded.request(method, path, json=body, headers={"Authorization": f"Bearer {plain}"})
        assert r.status_code == 200, (path, r.text)
    assert _batches(guarded) >= before + 2 * 6  # every route that runs a model ran one
    r = guarded.post(
        "/translate", data={"q": "Ja.", "source": "de", "target": "en", "api_key": plain}
    )
    assert r.status_code == 200  # a form's key


def test_a_route_without_the_access_check_cannot_run_a_model(model_dirs):
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    app = create_app([ModelSpec(model_dirs["translator"], "de-en")], background=False)

    async def unguarded():
        registry = app.state.registry
        model = registry.models["de-en"]
        return await registry.run(model, ["Ja."], lambda items: model.translate(items))

    app.add_api_route("/unguarded", unguarded, methods=["POST"])
    with TestClient(app) as c:
        assert c.post("/v1/translate", json={"text": "Ja."}).status_code == 200
        r = c.post("/unguarded")
        assert r.status_code == 500 and "without the access check" in r.json()["error"]["message"]


def test_a_keys_character_limit(guarded, keys):
    short = keys[1]["short"]
    r = guarded.post(
        "/translate", json={"q": "Hallo Welt", "source": "de", "target": "en", "api_key": short}
    )
    assert r.status_code == 400
    assert r.json() == {"error": "Invalid request: request (10) exceeds text limit (5)"}
    r = guarded.post("/v1/translate", json={"text": "Hallo Welt", "api_key": short})
    assert r.status_code == 422 and "this API key's limit" in r.json()["error"]["message"]
    r = guarded.post(
        "/translate", json={"q": "Hallo", "source": "de", "target": "en", "api_key": short}
    )
    assert r.status_code == 200


def test_a_keys_own_request_limit_and_retry_after(guarded, keys):
    slow = keys[1]["slow"]
    body = {"q": "Ja.", "source": "de", "target": "en", "api_key": slow}
    assert [guarded.post("/translate", json=body).status_code for _ in range(2)] == [200, 200]
    r = guarded.post("/translate", json=body)
    assert r.status_code == 429 and r.json() == {"error": "Slowdown: 2 per 1 minute"}
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    r = guarded.post(
        "/v1/translate", json={"text": "Ja."}, headers={"Authorization": f"Bearer {slow}"}
    )
    assert r.status_code == 429 and "2 per 1 minute" in r.json()["error"]["message"]


def test_an_origin_may_go_without_a_key_unless_under_attack(model_dirs, keys):
    from aiayn.serve.access import AccessConfig

    db = str(keys[0])
    origin = AccessConfig(
        api_keys=True,
        api_keys_db=db,
        require_api_key_origin=r"https://translate\.example\.org",
        get_api_key_link="https://example.org/keys",
    )
    body = {"q": "Ja.", "source": "de", "target": "en"}
    ours = {"Origin": "https://translate.example.org"}
    with make_client({"t": model_dirs["translator"]}, access=origin) as c:
        wait_ready(c)
        assert c.post("/translate", json=body, headers=ours).status_code == 200
        r = c.post("/translate", json=body, headers={"Origin": "https://elsewhere.example"})
        assert r.status_code == 400
        longer = {"Origin": "https://translate.example.org.attacker.example"}  # a prefix only
        assert c.post("/translate", json=body, headers=longer).status_code == 400
        assert r.json() == {"error": "Visit https://example.org/keys to get an API key"}
        settings = c.get("/frontend/settings").json()
        assert settings["apiKeys"] is True and settings["keyRequired"] is True
    attack = AccessConfig(
        api_keys=True, api_keys_db=db, require_api_key_origin=origin.require_api_key_origin,
        under_attack=True,
    )  # fmt: skip
    with make_client({"t": model_dirs["translator"]}, access=attack) as c:
        wait_ready(c)
        assert c.post("/translate", json=body, headers=ours).status_code == 400


def test_request_limits_per_client_address(model_dirs):
    from aiayn.serve.access import AccessConfig

    body = {"q": "Ja.", "source": "de", "target": "en"}
    with make_client({"t": model_dirs["translator"]}, access=AccessConfig(req_limit=2)) as c:
        wait_ready(c)
        a, b = {"X-Forwarded-For": "10.0.0.1"}, {"X-Forwarded-For": "10.0.0.2"}
        codes = [c.post("/translate", json=body, headers=h).status_code for h in (a, b, a)]
        assert codes == [200, 200, 429]  # one client: the header is not trusted
        assert c.get("/languages").status_code == 200  # runs no model: not counted
    trusted = AccessConfig(req_limit=2, trust_forwarded_for=True)
    with make_client({"t": model_dirs["translator"]}, access=trusted) as c:
        wait_ready(c)
        codes = [c.post("/translate", json=body, headers=h).status_code for h in (a, a, b, b, a)]
        assert codes == [200, 200, 200, 200, 429]
        # the proxy appends the address it saw: what the client wrote before it counts for
        # nothing, so a client cannot take a new address a request
        spoofed = {"X-Forwarded-For": "192.0.2.9, 10.0.0.1"}
        assert c.post("/translate", json=body, headers=spoofed).status_code == 429
        r = c.post("/v1/translate", json={"text": "Ja."}, headers=b)
        assert r.status_code == 429 and r.json()["error"]["code"] == 429


def test_a_batch_larger_than_a_whole_window_is_refused_not_delayed(model_dirs):
    """A request of more texts than a limit allows in a window could never pass: 400 naming
    the limit, not a 429 with a Retry-After that a client would obey forever."""
    from aiayn.serve.access import AccessConfig

    with make_client({"t": model_dirs["translator"]}, access=AccessConfig(req_limit=3)) as c:
        wait_ready(c)
        r = c.post("/translate", json={"q": ["Ja."] * 4, "source": "de", "target": "en"})
        assert r.status_code == 400
        assert r.json() == {"error": "Invalid request: 4 texts in one request; the limit is "
                            "3 per 1 minute"}  # fmt: skip
        r = c.post("/v1/translate", json={"text": ["Ja."] * 4})
        assert r.status_code == 400 and "the limit is 3 per 1 minute" in r.text
        r = c.post("/translate", json={"q": ["Ja."] * 3, "source": "de", "target": "en"})
        assert r.status_code == 200


def test_a_key_given_on_standard_input(tmp_path, monkeypatch, capsys):
    import io

    from aiayn.serve.keys import KeyStore

    db = tmp_path / "k.db"
    monkeypatch.setattr("sys.stdin", io.StringIO("a-key-from-a-secret-store\n"))
    assert main(["keys", "--api-keys-db", str(db), "add", "--key", "-"]) == 0
    out, err = capsys.readouterr()
    assert "a-key-from-a-secret-store" not in out + err  # not echoed into a script's log
    store = KeyStore(db)
    try:
        assert store.lookup("a-key-from-a-secret-store") is not None
    finally:
        store.close()
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["keys", "--api-keys-db", str(db), "add", "--key", "-"]) == 2
    assert "standard input held no key" in capsys.readouterr().err


def test_hourly_and_daily_limits_count_too(model_dirs):
    from aiayn.serve.access import AccessConfig

    for access in (AccessConfig(hourly_req_limit=1), AccessConfig(daily_req_limit=1, req_limit=5)):
        with make_client({"t": model_dirs["translator"]}, access=access) as c:
            wait_ready(c)
            codes = [c.post("/v1/translate", json={"text": "Ja."}).status_code for _ in range(2)]
            assert codes == [200, 429]
            unit = "hour" if access.hourly_req_limit else "day"
            assert f"1 per 1 {unit}" in c.post("/v1/translate", json={"text": "Ja."}).text


def test_metrics_only_with_the_flag_and_its_token(model_dirs):
    from aiayn.serve.access import AccessConfig

    with make_client({"t": model_dirs["translator"]}) as c:
        wait_ready(c)
        assert c.get("/metrics").status_code == 404
    token = AccessConfig(metrics=True, metrics_auth_token="s3cret")
    with make_client({"t": model_dirs["translator"]}, access=token) as c:
        wait_ready(c)
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
        r = c.get("/metrics", headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 200 and "aiayn_requests" in r.text


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"req_limit": "5"}, "req_limit"),
        ({"require_api_key_origin": "("}, "not a regular expression"),
        ({"shared_storage": "mongodb://x"}, "redis://HOST:PORT"),
        ({"under_attack": True}, "add --api-keys"),
        ({"metrics_auth_token": "t"}, "^--metrics-auth-token applies to /metrics.*add --metrics$"),
        ({"metrics_open": True}, "^--metrics-open applies to /metrics.*add --metrics$"),
        ({"metrics": True, "metrics_open": True, "metrics_auth_token": "t"}, "give one"),
    ],
)
def test_bad_access_settings_are_named(fields, words):
    from aiayn.serve.access import AccessConfig

    with pytest.raises(ValueError, match=words):
        AccessConfig(**fields)


def test_serve_with_keys_needs_the_database(model_dirs, tmp_path, capsys):
    db = tmp_path / "none.db"
    assert main(["serve", str(model_dirs["translator"]), "--api-keys", "--api-keys-db", str(db)])
    assert "no API key database" in capsys.readouterr().err and not db.exists()


def test_libretranslates_flags_reach_the_server(model_dirs, monkeypatch):
    from aiayn.serve import server

    got = {}

    def run_server(specs, config, host, port, access=None, frontend=None):
        got.update(specs=specs, config=config, access=access, frontend=frontend)
        return 0

    monkeypatch.setattr(server, "run_server", run_server)
    argv = ["serve", str(model_dirs["translator"]), "--char-limit", "500", "--batch-limit", "8",
            "--req-limit", "30", "--hourly-req-limit", "-1", "--daily-req-limit", "900",
            "--req-limit-storage", "redis://127.0.0.1:6390", "--api-keys",
            "--api-keys-db-path", "k.db", "--require-api-key-origin", "https://x", "--under-attack",
            "--get-api-key-link", "https://x/keys", "--trust-forwarded-for", "--metrics",
            "--metrics-auth-token", "t", "--alternatives-limit", "2", "--suggestions",
            "--disable-web-ui", "--frontend-timeout", "900"]  # fmt: skip
    assert main(argv) == 0
    config, access, frontend = got["config"], got["access"], got["frontend"]
    assert (config.max_chars, config.max_texts) == (500, 8)
    assert (access.req_limit, access.hourly_req_limit, access.daily_req_limit) == (30, 0, 900)
    assert access.shared_storage == "redis://127.0.0.1:6390" and access.api_keys_db == "k.db"
    assert access.api_keys and access.under_attack and access.trust_forwarded_for
    assert access.require_api_key_origin == "https://x"
    assert access.get_api_key_link == "https://x/keys"
    assert access.metrics and access.metrics_auth_token == "t"
    assert frontend.alternatives_limit == 2 and frontend.suggestions
    assert frontend.disable_web_ui and frontend.frontend_timeout == 900
    assert [s.engine for s in got["specs"]] == ["auto"]  # the default engine


def test_the_openapi_document_names_the_key_scheme_only_with_keys(guarded, client):
    with_keys = guarded.get("/openapi.json").json()
    assert "HTTPBearer" in with_keys["components"]["securitySchemes"]
    for path in ("/translate", "/v1/translate", "/v1/completions"):
        operation = with_keys["paths"][path]["post"]
        assert operation["security"] == [{"HTTPBearer": []}]
        assert {"403", "429"} <= set(operation["responses"]), path
    assert "security" not in with_keys["paths"]["/languages"]["get"]
    without = client.get("/openapi.json").json()
    assert "securitySchemes" not in without["components"]
    assert all(
        "security" not in op and "403" not in op["responses"]
        for ops in without["paths"].values()
        for op in ops.values()
        if op is not without["paths"].get("/suggest", {}).get("post")
        and op is not without["paths"].get("/translate_file", {}).get("post")
    )  # /suggest and /translate_file answer 403 when turned off


def test_a_batch_counts_as_many_requests_as_it_has_texts(model_dirs):
    from aiayn.serve.access import AccessConfig

    with make_client({"t": model_dirs["translator"]}, access=AccessConfig(req_limit=4)) as c:
        wait_ready(c)
        batch = {"q": ["Ja.", "Nein.", "Gut."], "source": "de", "target": "en"}
        assert c.post("/translate", json=batch).status_code == 200  # 3 of 4
        r = c.post("/v1/translate", json={"text": ["Ja.", "Nein."]})
        assert r.status_code == 429  # 2 more: refused, and not counted
        assert c.post("/v1/translate", json={"text": "Ja."}).status_code == 200  # the 4th
        assert c.post("/v1/embeddings", json={"input": ["a"], "model": "t"}).status_code == 429


@pytest.fixture
def own_keys(model_dirs, tmp_path):
    """A server over a key database of its own: (client, database path, a key in it)."""
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.keys import KeyStore

    path = tmp_path / "keys.db"
    store = KeyStore(path)
    key = store.add()[0]
    store.close()
    with make_client(model_dirs, access=AccessConfig(api_keys=True, api_keys_db=str(path))) as c:
        wait_ready(c)
        yield c, path, key


def test_a_key_database_put_in_the_old_ones_place_counts_at_once(own_keys, tmp_path):
    import os

    from aiayn.serve.keys import KeyStore

    client, path, old = own_keys
    body = {"q": "Ja.", "source": "de", "target": "en"}
    assert client.post("/translate", json={**body, "api_key": old}).status_code == 200
    store = KeyStore(tmp_path / "new.db")  # the keys remade from scratch, moved in
    new = store.add()[0]
    store.close()
    os.replace(tmp_path / "new.db", path)
    r = client.post("/translate", json={**body, "api_key": old})
    assert r.status_code == 403 and r.json() == {"error": "Invalid API key"}
    assert client.post("/translate", json={**body, "api_key": new}).status_code == 200
    path.unlink()  # no database: no key can be checked, and no model runs
    r = client.post("/translate", json={**body, "api_key": new})
    assert r.status_code == 503 and "API keys cannot be checked" in r.json()["error"]
    assert int(r.headers["Retry-After"]) >= 1


def test_a_locked_or_damaged_key_database_is_503_not_500(own_keys):
    import time

    client, path, key = own_keys
    body = {"text": "Ja.", "api_key": key}
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")  # another process holding the file (a backup, a shell)
    try:
        start = time.monotonic()
        r = client.post("/v1/translate", json=body)
        waited = time.monotonic() - start
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert r.status_code == 503, r.text
    assert r.json()["error"]["message"] == "API keys cannot be checked now; try again later"
    assert waited < 8  # the server's short wait, not the 10 s of `aiayn keys`
    assert client.post("/v1/translate", json=body).status_code == 200  # and back when free
    with open(path, "r+b") as f:  # damaged in place
        f.write(b"\xff" * 4096)
    r = client.post("/v1/translate", json=body)
    assert r.status_code == 503 and "Traceback" not in r.text


def test_the_key_database_is_its_owners_alone(tmp_path, capsys):
    import os
    import stat

    db = tmp_path / "keys.db"
    assert main(["keys", "--db", str(db), "add"]) == 0
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    key = capsys.readouterr().out.strip()
    assert main(["keys", "--db", str(db), "remove", key]) == 0
    assert main(["keys", "--db", str(db), "remove", key]) == 2  # gone: named by its id
    err = capsys.readouterr().err
    assert "no API key (id " in err and key not in err


def test_a_new_key_never_reads_as_an_option(monkeypatch):
    """A generated key beginning with "-" (one in 64) made `aiayn keys remove KEY` fail: the
    key was read as an option."""
    from aiayn.serve import keys

    drawn = iter(["-Fo9Bar7GD", "_Fo9Bar7GD"])
    monkeypatch.setattr(keys.secrets, "token_urlsafe", lambda n: next(drawn))
    assert keys.new_key() == "_Fo9Bar7GD"
