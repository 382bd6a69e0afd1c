"""Clients that try the server's limits: many texts in one request on every route that runs a
model, suggestions that would fill the disk, and API keys guessed one after another. Each
case as such a client sends it, over HTTP."""

import sqlite3

import pytest

from aiayn.cli import main
from tests.serve.conftest import make_client, wait_ready
from tests.serve.test_access import _batches

pytest.importorskip("fastapi")
pytest.importorskip("limits")

# eleven texts on every route that runs a model on a list of them
ELEVEN = {
    "/translate": {"q": ["Ja."] * 11, "source": "de", "target": "en"},
    "/detect": {"q": ["Ja."] * 11},
    "/v1/translate": {"text": ["Ja."] * 11},
    "/v1/classify": {"input": ["gut"] * 11},
    "/v1/embeddings": {"input": ["gut"] * 11, "model": "sentiment"},
    "/v1/completions": {"prompt": ["the"] * 11, "max_tokens": 1},
}
LT = {"/translate", "/detect", "/suggest"}


@pytest.fixture(scope="module")
def limited_server(model_dirs):
    from aiayn.serve.access import AccessConfig

    with make_client(model_dirs, access=AccessConfig(req_limit=10)) as c:
        wait_ready(c)
        yield c


@pytest.fixture
def limited(limited_server):
    """The three models, 10 requests a minute per client address, none counted yet."""
    limited_server.app.state.gate.storage.reset()
    return limited_server


def _error(path: str, r) -> str:
    body = r.json()["error"]
    return body if path in LT else body["message"]


@pytest.mark.parametrize("path", sorted(ELEVEN))
def test_more_texts_than_a_whole_window_is_400_on_every_route(limited, path):
    """A request of 11 texts under --req-limit 10 can never pass: 400 naming the limit, as
    /translate answers it, and no model runs."""
    before = _batches(limited)
    r = limited.post(path, json=ELEVEN[path])
    assert r.status_code == 400, r.text
    assert "11 texts in one request; the limit is 10 per 1 minute" in _error(path, r)
    assert _batches(limited) == before
    ten = {k: v[:10] if isinstance(v, list) else v for k, v in ELEVEN[path].items()}
    assert limited.post(path, json=ten).status_code == 200  # the whole window: served
    r = limited.post(path, json={k: v[:1] if isinstance(v, list) else v for k, v in ten.items()})
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 60


def test_completions_count_each_prompt_and_each_choice(limited):
    """Ten requests of 64 prompts each were 640 completions under --req-limit 10: a list of
    prompts counts each, token id prompts too, and n choices of each prompt count n."""
    before = _batches(limited)
    r = limited.post("/v1/completions", json={"prompt": ["the"] * 64, "max_tokens": 1})
    assert r.status_code == 400 and "64 texts in one request" in r.json()["error"]["message"]
    r = limited.post("/v1/completions", json={"prompt": ["the"] * 3, "n": 4, "max_tokens": 1})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == "n"
    assert error["message"] == (
        "12 texts in one request (3 prompts x n 4); the limit is 10 per 1 minute"
    )
    r = limited.post("/v1/completions", json={"prompt": [[5, 6]] * 11, "max_tokens": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
    assert _batches(limited) == before  # none of them ran a model
    spent = [
        ({"prompt": ["the", "a"], "n": 2}, 200),  # 4 of 10
        ({"prompt": [[5, 6], [7], [8]]}, 200),  # 7
        ({"prompt": "the", "n": 4}, 429),  # 11: refused, not counted
        ({"prompt": [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}, 200),  # one prompt's ids: 8
        ({"prompt": "the", "n": 2}, 200),  # 10
        ({"prompt": "the"}, 429),
    ]
    for body, status in spent:
        r = limited.post("/v1/completions", json={**body, "max_tokens": 1})
        assert r.status_code == status, (body, r.text)


def test_embeddings_count_each_token_id_list_and_one_list_once(limited):
    one = list(range(3, 15))  # 12 ids: one input
    r = limited.post("/v1/embeddings", json={"input": one, "model": "sentiment"})
    assert r.status_code == 200 and len(r.json()["data"]) == 1
    r = limited.post("/v1/embeddings", json={"input": [[3, 4]] * 11, "model": "sentiment"})
    assert r.status_code == 400 and "11 texts in one request" in r.text
    r = limited.post("/v1/embeddings", json={"input": [[3, 4]] * 9, "model": "sentiment"})
    assert r.status_code == 200  # 1 + 9
    r = limited.post("/v1/embeddings", json={"input": "gut", "model": "sentiment"})
    assert r.status_code == 429


def test_a_keys_own_limit_refuses_a_larger_request_as_400(model_dirs, tmp_path):
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.keys import KeyStore

    store = KeyStore(tmp_path / "keys.db")
    key, _ = store.add(req_limit=5)
    store.close()
    access = AccessConfig(api_keys=True, api_keys_db=str(tmp_path / "keys.db"))
    with make_client({"lm": model_dirs["lm"]}, access=access) as c:
        wait_ready(c)
        bearer = {"Authorization": f"Bearer {key}"}
        body = {"prompt": "the", "n": 6, "max_tokens": 1}
        r = c.post("/v1/completions", json=body, headers=bearer)
        assert r.status_code == 400 and "the limit is 5 per 1 minute" in r.text
        r = c.post("/v1/completions", json={**body, "n": 5}, headers=bearer)
        assert r.status_code == 200 and len(r.json()["choices"]) == 5


@pytest.fixture
def suggesting(model_dirs, tmp_path):
    """A translator storing suggestions, at most 3 of them: (client, database path)."""
    from aiayn.serve.config import FrontendConfig

    db = tmp_path / "s.db"
    frontend = FrontendConfig(suggestions=True, suggestions_db=str(db), suggestions_max_rows=3)
    with make_client({"t": model_dirs["translator"]}, frontend=frontend, max_chars=50) as c:
        wait_ready(c)
        yield c, db


def _rows(db) -> list:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT q, s, source, target FROM suggestions ORDER BY rowid").fetchall()


def test_suggestions_of_languages_not_served_are_refused(suggesting):
    c, db = suggesting
    refused = {
        ("zz", "qq"): "zz is not supported",
        ("de", "qq"): "qq is not supported",
        ("en", "de"): "German (de) is not available as a target language from English (en)",
        ("de", "de"): "German (de) is not available as a target language from German (de)",
    }
    for (source, target), error in refused.items():
        body = {"q": "Hallo", "s": "Hello", "source": source, "target": target}
        r = c.post("/suggest", json=body)
        assert r.status_code == 400 and r.json() == {"error": error}
    r = c.post("/suggest", data={"q": "Hallo", "s": "Hello", "source": "auto", "target": "EN"})
    assert r.status_code == 200  # 'auto': the only language translated into English
    assert _rows(db) == [("Hallo", "Hello", "de", "en")]


def test_suggestions_are_bounded_in_size_and_number(suggesting):
    """Languages of 400,000 characters each were stored; texts past --char-limit are refused
    in LibreTranslate's words; the database keeps the newest --suggestions-max-rows."""
    c, db = suggesting
    huge = "x" * 400_000
    r = c.post("/suggest", json={"q": "Hallo", "s": "Hello", "source": huge, "target": huge})
    assert r.status_code == 400 and r.json()["error"].endswith("is not supported")
    for name in ("q", "s"):
        body = {"q": "Hallo", "s": "Hello", "source": "de", "target": "en", name: "y" * 51}
        r = c.post("/suggest", json=body)
        assert r.status_code == 400
        assert r.json() == {"error": "Invalid request: request (51) exceeds text limit (50)"}
    assert _rows(db) == []
    for i in range(5):
        body = {"q": f"Hallo {i}", "s": f"Hello {i}", "source": "de", "target": "en"}
        assert c.post("/suggest", json=body).status_code == 200
    assert _rows(db) == [(f"Hallo {i}", f"Hello {i}", "de", "en") for i in (2, 3, 4)]


def test_suggestions_count_against_the_request_limits(model_dirs, tmp_path):
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.config import FrontendConfig

    frontend = FrontendConfig(suggestions=True, suggestions_db=str(tmp_path / "s.db"))
    access = AccessConfig(req_limit=2)
    with make_client({"t": model_dirs["translator"]}, access=access, frontend=frontend) as c:
        wait_ready(c)
        body = {"q": "Hallo", "s": "Hello", "source": "de", "target": "en"}
        codes = [c.post("/suggest", json=body).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        assert (
            c.post("/translate", json={"q": "Ja.", "source": "de", "target": "en"}).status_code
            == 429
        )
    assert len(_rows(tmp_path / "s.db")) == 2


@pytest.fixture
def keyed(model_dirs, tmp_path):
    """The three models behind --api-keys with --key-failures-limit 3, the client address
    X-Forwarded-For's: (client, a valid key)."""
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.keys import KeyStore

    store = KeyStore(tmp_path / "keys.db")
    key, _ = store.add()
    store.close()
    access = AccessConfig(
        api_keys=True,
        api_keys_db=str(tmp_path / "keys.db"),
        key_failures_limit=3,
        trust_forwarded_for=True,
    )
    with make_client(model_dirs, access=access) as c:
        wait_ready(c)
        yield c, key


def test_wrong_keys_from_one_address_are_throttled(keyed):
    """Three wrong keys in a minute, then every key from that address is refused 429 with
    Retry-After (the right one too: a key let through would tell a guesser it is right);
    another address is not affected; a request without a key is no attempt."""
    c, key = keyed
    guesser, other = {"X-Forwarded-For": "10.0.0.1"}, {"X-Forwarded-For": "10.0.0.2"}
    before = _batches(c)
    body = {"q": "Ja.", "source": "de", "target": "en"}
    for wrong in ("x" * 20, 12345, "y" * 20):  # a key that is no string is a wrong one too
        r = c.post("/translate", json={**body, "api_key": wrong}, headers=guesser)
        assert r.status_code == 403 and r.json() == {"error": "Invalid API key"}
    r = c.post("/translate", json={**body, "api_key": "z" * 20}, headers=guesser)
    assert r.status_code == 429
    assert r.json() == {"error": "Slowdown: too many invalid API keys (3 per 1 minute)"}
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    r = c.post("/translate", json={**body, "api_key": key}, headers=guesser)
    assert r.status_code == 429  # the right key as well
    bearer = {**guesser, "Authorization": f"Bearer {key}"}
    r = c.post("/v1/translate", json={"text": "Ja."}, headers=bearer)
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 60
    error = r.json()["error"]
    assert error["param"] == "api_key" and error["code"] == 429
    assert "too many invalid API keys from this address (3 per 1 minute" in error["message"]
    assert _batches(c) == before  # no model ran for the guesser
    r = c.post("/translate", json=body, headers=guesser)
    assert r.status_code == 400  # no key: not an attempt, answered as ever
    r = c.post("/translate", json={**body, "api_key": key}, headers=other)
    assert r.status_code == 200
    r = c.post("/translate", json={**body, "api_key": "w" * 20}, headers=other)
    assert r.status_code == 403  # the other address's first wrong key


def test_wrong_keys_without_a_limit_are_each_403(model_dirs, tmp_path):
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.keys import KeyStore

    KeyStore(tmp_path / "keys.db").close()
    access = AccessConfig(
        api_keys=True, api_keys_db=str(tmp_path / "keys.db"), key_failures_limit=-1
    )
    assert access.key_failures_limit == 0  # LibreTranslate's -1: no limit
    with make_client({"t": model_dirs["translator"]}, access=access) as c:
        wait_ready(c)
        body = {"q": "Ja.", "target": "en", "api_key": "x" * 20}
        assert {c.post("/translate", json=body).status_code for _ in range(15)} == {403}


def test_the_flags_reach_the_server(model_dirs, monkeypatch):
    from aiayn.serve import server

    got = {}

    def run_server(specs, config, host, port, access=None, frontend=None):
        got.update(access=access, frontend=frontend)
        return 0

    monkeypatch.setattr(server, "run_server", run_server)
    argv = ["serve", str(model_dirs["translator"]), "--suggestions", "--suggestions-max-rows",
            "7", "--api-keys", "--key-failures-limit", "4"]  # fmt: skip
    assert main(argv) == 0
    assert got["access"].key_failures_limit == 4
    assert got["frontend"].suggestions_max_rows == 7
    assert main(argv[:2]) == 0  # the defaults
    assert got["access"].key_failures_limit == 10
    assert got["frontend"].suggestions_max_rows == 10_000
    assert main([*argv[:2], "--suggestions-max-rows", "0"]) == 2
