"""A LibreTranslate deployment moved over to ``aiayn serve`` as it is, over HTTP: its key
database imported (``aiayn keys import``) and used by LibreTranslate's own client, its short
keys, an origin-only server, ``/frontend/settings``' languages, ``/metrics``' token, and a
request without ``source``."""

import hashlib
import json
import sqlite3
import urllib.error
import uuid

import pytest

from aiayn.cli import main
from tests.serve.conftest import live_server, wait_ready

pytest.importorskip("fastapi")
pytest.importorskip("limits")

# LibreTranslate's table (libretranslate/api_keys.py) since 1.5.5, and before (no char_limit)
LT_SCHEMA = """CREATE TABLE IF NOT EXISTS api_keys (
    "api_key"	TEXT NOT NULL,
    "req_limit"	INTEGER NOT NULL,
    "char_limit" INTEGER DEFAULT NULL,
    PRIMARY KEY("api_key")
);"""
LT_SCHEMA_1_5_4 = """CREATE TABLE IF NOT EXISTS api_keys (
    "api_key"	TEXT NOT NULL,
    "req_limit"	INTEGER NOT NULL,
    PRIMARY KEY("api_key")
);"""
ORIGIN = r"https://translate\.example\.org"


def served(model_dirs, access=None, frontend=None):
    """A test client of the translator on the torch engine (no CTranslate2 conversion)."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    specs = [ModelSpec(model_dirs["translator"], "t", engine="torch")]
    return TestClient(create_app(specs, access=access, frontend=frontend))


def lt_database(path, rows, schema=LT_SCHEMA):
    """A key database as LibreTranslate writes it (``ltmanage keys add``): plain-text keys."""
    db = sqlite3.connect(path)
    db.execute(schema)
    columns = "api_key, req_limit" + (", char_limit" if "char_limit" in schema else "")
    marks = ", ".join("?" * len(rows[0])) if rows else ""
    for row in rows:
        db.execute(f"INSERT INTO api_keys ({columns}) VALUES ({marks})", row)
    db.commit()
    db.close()
    return path


def digest_of(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def lt_keys():
    """LibreTranslate's own test key (9 characters), a uuid4 key as ``ltmanage keys add``
    makes one with ``--char-limit 5``, and one with 2 requests a minute."""
    return {"short": "valid-key", "chars": str(uuid.uuid4()), "slow": str(uuid.uuid4())}


@pytest.fixture(scope="module")
def imported(lt_keys, tmp_path_factory):
    """(where aiayn's key database goes, LibreTranslate's database holding ``lt_keys``)."""
    root = tmp_path_factory.mktemp("lt")
    lt = lt_database(
        root / "api_keys.db",
        [(lt_keys["short"], 60, None), (lt_keys["chars"], 60, 5), (lt_keys["slow"], 2, None)],
    )
    db = root / "aiayn-keys.db"
    return db, lt


def test_a_libretranslate_key_database_imported_and_used_by_its_client(
    model_dirs, imported, lt_keys, capsys
):
    from libretranslatepy import LibreTranslateAPI

    from aiayn.serve.access import AccessConfig
    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    db, lt = imported
    before = digest_of(lt)
    assert main(["keys", "--db", str(db), "import", str(lt)]) == 0
    err = capsys.readouterr().err
    assert f"3 keys of {lt} in {db}: 3 new" in err
    assert "1 of the keys are weak here" in err and "valid-key" not in err  # named by id
    assert digest_of(lt) == before  # LibreTranslate's file read, never written
    raw = db.read_bytes()
    assert not any(key.encode() in raw for key in lt_keys.values())  # digests only
    assert main(["keys", "--db", str(db), "list"]) == 0
    listing = capsys.readouterr().out.splitlines()[1:]
    assert sorted(line.split("\t")[1:3] for line in listing) == [
        ["2", "-"],
        ["60", "-"],
        ["60", "5"],
    ]
    assert all(line.endswith("\tlibretranslate") for line in listing)

    access = AccessConfig(api_keys=True, api_keys_db=str(db))
    app = create_app(
        [ModelSpec(model_dirs["translator"], "de-en", engine="torch")],
        access=access,
        background=False,
    )
    with live_server(app) as port:
        url = f"http://127.0.0.1:{port}"
        model = app.state.registry.models["de-en"]
        want = model.api.translate(["Das ist gut."], scores=False)[0].text
        for name in ("short", "chars", "slow"):
            lt_client = LibreTranslateAPI(url, api_key=lt_keys[name])
            assert lt_client.translate("Ja." if name == "chars" else "Das ist gut.", "de", "en")
        assert (
            LibreTranslateAPI(url, api_key="valid-key").translate("Das ist gut.", "de", "en")
            == want
        )
        refusals = [
            ("chars", "Das ist gut.", 400, "Invalid request: request (12) exceeds text limit (5)"),
            ("slow", "Ja.", 200, None),  # its second request this minute
            ("slow", "Ja.", 429, "Slowdown: 2 per 1 minute"),
            ("valid-ke", "Ja.", 403, "Invalid API key"),  # not a prefix of a key
        ]
        for name, text, status, words in refusals:
            lt_client = LibreTranslateAPI(url, api_key=lt_keys.get(name, name))
            if status == 200:
                assert lt_client.translate(text, "de", "en")
                continue
            with pytest.raises(urllib.error.HTTPError) as refused:
                lt_client.translate(text, "de", "en")
            assert refused.value.code == status
            assert json.loads(refused.value.read()) == {"error": words}


def test_importing_again_adds_nothing_and_takes_changed_limits(tmp_path, capsys):
    from aiayn.serve.keys import KeyStore

    lt = lt_database(tmp_path / "api_keys.db", [("k" * 20, 60, None), ("j" * 20, 30, 100)])
    db = tmp_path / "aiayn.db"
    assert main(["keys", "--db", str(db), "import", str(lt)]) == 0
    assert "2 new, 0 already there with other limits" in capsys.readouterr().err
    assert main(["keys", "--db", str(db), "import", str(lt)]) == 0
    err = capsys.readouterr().err
    assert "0 new, 0 already there with other limits (now LibreTranslate's), 2 already" in err
    assert "weak" not in err
    with sqlite3.connect(lt) as c:  # the operator changed a limit there meanwhile
        c.execute("UPDATE api_keys SET req_limit = 5 WHERE api_key = ?", ("j" * 20,))
        c.execute("INSERT INTO api_keys VALUES (?, 7, NULL)", ("i" * 20,))
    c.close()
    assert main(["keys", "--db", str(db), "import", str(lt), "--name", "second"]) == 0
    assert "1 new, 1 already there with other limits" in capsys.readouterr().err
    store = KeyStore(db)
    try:
        assert len(store.all()) == 3
        changed = store.lookup("j" * 20)
        assert (changed.req_limit, changed.char_limit, changed.name) == (5, 100, "libretranslate")
        assert store.lookup("i" * 20).name == "second"
    finally:
        store.close()


def test_a_libretranslate_database_before_char_limit(tmp_path, capsys):
    from aiayn.serve.keys import KeyStore

    lt = lt_database(tmp_path / "api_keys.db", [("old-key", 10)], schema=LT_SCHEMA_1_5_4)
    db = tmp_path / "aiayn.db"
    assert main(["keys", "--db", str(db), "import", str(lt)]) == 0
    assert "1 new" in capsys.readouterr().err
    store = KeyStore(db)
    try:
        key = store.lookup("old-key")
        assert (key.req_limit, key.char_limit) == (10, None)
    finally:
        store.close()


def _junk(path):
    path.write_bytes(b"this is no SQLite file\n" * 200)


def _other_table(path):
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE suggestions (q TEXT, s TEXT)")
    c.close()


def _zero_limit(path):  # ltmanage keys add 0: a key no request can use
    lt_database(path, [("z" * 20, 60, None), ("y" * 20, 0, None), ("x" * 20, 60, 0)])


def _aiayns_own(path):
    from aiayn.serve.keys import KeyStore

    KeyStore(path).close()


@pytest.mark.parametrize(
    "make, words",
    [
        (None, "no such file"),
        (_junk, "not a LibreTranslate key database (file is not a database)"),
        (_other_table, "no table api_keys; its tables: suggestions"),
        (_zero_limit, "2 of 3 rows cannot be imported, so none was: row 2 (key id "),
        (_aiayns_own, "aiayn's own key database"),
    ],
)
def test_bad_input_is_named_and_leaves_both_files_as_they_were(tmp_path, capsys, make, words):
    from aiayn.serve.keys import KeyStore

    db = tmp_path / "aiayn.db"
    store = KeyStore(db)
    store.add("an-existing-key-0123456789")
    store.close()
    before = digest_of(db)
    source = tmp_path / "api_keys.db"
    if make is not None:
        make(source)
        source_before = digest_of(source)
    assert main(["keys", "--db", str(db), "import", str(source)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{source}: " in err and words in err, err
    assert digest_of(db) == before
    if make is not None:
        assert digest_of(source) == source_before
    if make is _zero_limit:
        assert "req_limit 0" in err and "char_limit 0" in err and "z" * 20 not in err


def test_libretranslates_database_given_where_aiayns_belongs_is_named(tmp_path, capsys):
    """``--api-keys-db db/api_keys.db`` kept from LibreTranslate's flags: the server and
    ``aiayn keys`` say what the file is and how to import it, and leave it as it was."""
    from aiayn.serve.keys import KeyStore

    lt = lt_database(tmp_path / "api_keys.db", [("valid-key", 60, None)])
    before = digest_of(lt)
    with pytest.raises(ValueError, match="LibreTranslate's key database.*aiayn keys import"):
        KeyStore(lt, create=False)
    assert main(["keys", "--db", str(lt), "import", str(lt)]) == 2
    assert "LibreTranslate's key database (keys in plain text)" in capsys.readouterr().err
    assert main(["keys", "--db", str(lt), "add", "--key", "another-key"]) == 2
    assert digest_of(lt) == before


def test_short_keys_as_libretranslate_takes_them(model_dirs, tmp_path, capsys):
    from aiayn.serve.access import AccessConfig

    db = str(tmp_path / "keys.db")
    for key in ("valid-key", "abc", " padded-key-0123456789"):
        assert main(["keys", "--db", db, "add", "--key", key, "--req-limit", "100"]) == 0
    err = capsys.readouterr().err
    assert err.count("shorter than 16") == 2 and "spaces at either end" in err
    access = AccessConfig(api_keys=True, api_keys_db=db)
    with served(model_dirs, access=access) as c:
        wait_ready(c)
        body = {"q": "Ja.", "source": "de", "target": "en"}
        for key in ("valid-key", "abc", " padded-key-0123456789"):
            assert c.post("/translate", json={**body, "api_key": key}).status_code == 200
            assert c.post("/translate", data={**body, "api_key": key}).status_code == 200
        r = c.post("/v1/translate", json={"text": "Ja."}, headers={"Authorization": "Bearer abc"})
        assert r.status_code == 200
        r = c.post("/translate", json={**body, "api_key": "ab"})
        assert r.status_code == 403 and r.json() == {"error": "Invalid API key"}


@pytest.mark.parametrize("api_keys", [True, False])
def test_an_origin_only_server_without_a_key_database(model_dirs, tmp_path, api_keys):
    """LibreTranslate's ``--api-keys --require-api-key-origin REGEX`` with no keys: a request
    from a matching Origin is served, any other one refused in LibreTranslate's words, and
    any key is invalid (its database is empty)."""
    from aiayn.serve.access import AccessConfig

    missing = tmp_path / "none.db"
    access = AccessConfig(
        api_keys=api_keys, api_keys_db=str(missing), require_api_key_origin=ORIGIN
    )
    body = {"q": "Ja.", "source": "de", "target": "en"}
    ours = {"Origin": "https://translate.example.org"}
    with served(model_dirs, access=access) as c:
        wait_ready(c)
        assert c.post("/translate", json=body, headers=ours).status_code == 200
        assert c.post("/translate", data=body, headers=ours).status_code == 200
        assert c.post("/v1/translate", json={"text": "Ja."}, headers=ours).status_code == 200
        for headers in ({"Origin": "https://elsewhere.example"}, {}):
            r = c.post("/translate", json=body, headers=headers)
            assert r.status_code == 400
            assert r.json() == {"error": "Please contact the server operator to get an API key"}
            r = c.post("/v1/translate", json={"text": "Ja."}, headers=headers)
            assert r.status_code == 400 and "requires an API key" in r.text
        r = c.post("/translate", json={**body, "api_key": "valid-key"}, headers=ours)
        assert r.status_code == 403 and r.json() == {"error": "Invalid API key"}
        settings = c.get("/frontend/settings").json()
        assert (settings["apiKeys"], settings["keyRequired"]) == (False, True)
        assert c.get("/openapi.json").json()["paths"]["/translate"]["post"]["security"]
    assert not missing.exists()  # no file made


def test_an_origin_only_server_starts_from_the_command_line(model_dirs, tmp_path, monkeypatch):
    """The flags as a LibreTranslate deployment gives them: the server starts (its app
    built and run, as ``run_server`` does) without a key database, and serves its Origin."""
    from fastapi.testclient import TestClient

    from aiayn.serve import server
    from aiayn.serve.app import create_app

    answers = []

    def run_server(specs, config, host, port, access=None, frontend=None):
        app = create_app(specs, config, access=access, frontend=frontend)
        with TestClient(app) as c:
            wait_ready(c)
            body = {"q": "Ja.", "source": "de", "target": "en"}
            for origin in ("https://translate.example.org", "https://elsewhere.example"):
                answers.append(c.post("/translate", json=body, headers={"Origin": origin}))
        return 0

    monkeypatch.setattr(server, "run_server", run_server)
    monkeypatch.chdir(tmp_path)  # the default database's directory: none there
    model = str(model_dirs["translator"])
    argv = ["serve", model, "--engine", "torch", "--api-keys", "--require-api-key-origin", ORIGIN]
    assert main(argv) == 0
    assert [r.status_code for r in answers] == [200, 400]
    assert main(["serve", model, "--engine", "torch", "--api-keys"]) == 2  # keys, no file
    assert not list(tmp_path.iterdir())


def _two_sources_into_english(model_dirs):
    from aiayn.serve.models import ModelSpec

    path = model_dirs["translator"]
    return [
        ModelSpec(path, name, tuple(name.split("-")), engine="torch")
        for name in ("de-en", "fr-en", "en-de")
    ]


@pytest.fixture(scope="module")
def three_pairs(model_dirs):
    """A client whose app serves de-en, fr-en and en-de, ``frontend`` set per test."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app

    app = create_app(_two_sources_into_english(model_dirs))
    with TestClient(app) as c:
        wait_ready(c)
        yield c


@pytest.mark.parametrize(
    "source, target, accept, want",
    [
        ("auto", "locale", "", ("auto", "en")),  # two sources into en: each text's detected
        ("auto", "locale", "de-CH, de;q=0.9, en;q=0.8", ("auto", "de")),
        ("auto", "locale", "fr, en;q=0.5, de;q=0", ("auto", "en")),  # fr is no target
        ("auto", "de", "", ("auto", "de")),
        ("fr", "locale", "de", ("fr", "en")),  # fr translates into en only
        ("en", "locale", "", ("en", "de")),
        ("fr", "en", "de", ("fr", "en")),
        ("zz", "zz", "", ("de", "en")),  # not served: the first pair, as LibreTranslate falls back
    ],
)
def test_frontend_languages(three_pairs, source, target, accept, want):
    from aiayn.serve.config import FrontendConfig

    three_pairs.app.state.frontend = FrontendConfig(
        frontend_language_source=source, frontend_language_target=target
    )
    settings = three_pairs.get("/frontend/settings", headers={"Accept-Language": accept}).json()
    languages = settings["language"]
    assert (languages["source"]["code"], languages["target"]["code"]) == want
    names = {"auto": "Auto Detect", "de": "German", "en": "English", "fr": "French"}
    assert languages["source"]["name"] == names[want[0]]
    if want[0] == "auto":  # the page's first request is one the server takes, in any language
        body = {"q": ["Ja, das ist gut.", "Yes, that is good."], "source": "auto"}
        r = three_pairs.post("/translate", json={**body, "target": want[1]})
        assert r.status_code == 200, r.text
        assert [d["language"] for d in r.json()["detectedLanguage"]] == ["de", "en"]


def test_frontend_language_flags(model_dirs, monkeypatch, capsys):
    from aiayn.serve import server

    got = {}
    monkeypatch.setattr(server, "run_server", lambda *a, frontend=None, **k: got.update(f=frontend))
    model = str(model_dirs["translator"])
    argv = ["serve", model, "--engine", "torch", "--frontend-language-source", "DE"]
    argv += ["--frontend-language-target", "en"]
    assert main(argv) == 0
    assert (got["f"].frontend_language_source, got["f"].frontend_language_target) == ("de", "en")
    assert main(["serve", model, "--engine", "torch"]) == 0
    assert (got["f"].frontend_language_source, got["f"].frontend_language_target) == (
        "auto", "locale",
    )  # fmt: skip
    assert main(["serve", model, "--engine", "torch", "--frontend-language-target", "auto"]) == 2
    err = capsys.readouterr().err
    assert "frontend_language_target: 'auto'; give a language code (de, pt-BR) or locale" in err


def test_metrics_need_a_token_unless_open(model_dirs):
    from aiayn.serve.access import AccessConfig

    bearer = {"Authorization": "Bearer s3cret"}
    cases = [
        (AccessConfig(metrics=True), {}, 401),
        (AccessConfig(metrics=True), bearer, 401),
        (AccessConfig(metrics=True, metrics_auth_token="s3cret"), {}, 401),
        (AccessConfig(metrics=True, metrics_auth_token="s3cret"), bearer, 200),
        (AccessConfig(metrics=True, metrics_open=True), {}, 200),
    ]
    for access, headers, status in cases:
        with served(model_dirs, access=access) as c:
            wait_ready(c)
            r = c.get("/metrics", headers=headers)
            assert r.status_code == status, (access, headers)
            if status == 200:
                assert "aiayn_requests_total" in r.text
            else:
                assert r.headers["www-authenticate"] == "Bearer"
                assert "aiayn_requests" not in r.text


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--metrics-auth-token", "t"], "--metrics-auth-token applies to /metrics"),
        (["--metrics-open"], "--metrics-open applies to /metrics"),
    ],
)
def test_a_metrics_flag_without_metrics_is_refused_at_start(
    model_dirs, monkeypatch, capsys, flags, words
):
    from aiayn.serve import server

    monkeypatch.setattr(server, "run_server", lambda *a, **k: 0)  # started: a failure, no hang
    assert main(["serve", str(model_dirs["translator"]), "--engine", "torch", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "add --metrics" in err
