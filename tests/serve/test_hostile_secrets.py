"""Secrets and the host's directories under a hostile client: an API key sent in any spelling
the access check reads stays out of the access log; a storage password out of every error and
log line; routes without a key name models, never directories; the server's SQLite files are
readable by their owner alone; a query string that is not UTF-8 and a number too long for
Python are 400s naming the problem."""

import http.client
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiayn.cli import main
from aiayn.serve.redact import is_key_field, query_items, redact_query, without_paths
from tests.conftest import REPO_ROOT
from tests.serve.conftest import wait_process_ready, wait_ready
from tests.serve.test_server import free_port

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("limits")

JSON = {"Content-Type": "application/json"}
# the name of the key as a client may spell it: the access check reads each as api_key
KEY_SPELLINGS = ["api_key", "%61pi_key", "api%5Fkey", "api%5fkey", "%61%70%69%5F%6B%65%79"]


def _serve(*flags: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT / 'src'}{os.pathsep}{REPO_ROOT}"}
    return subprocess.Popen(
        [sys.executable, "-m", "aiayn.cli", "serve", *flags],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _status(port: int, method: str, target: str, body=None, headers=None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, target, json.dumps(body) if body else None, {**JSON, **(headers or {})})
    status = conn.getresponse().status
    conn.close()
    return status


def _translator(model_dirs, access=None, frontend=None):
    """A test client of the app serving the tiny translator (torch: nothing converted)."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    spec = ModelSpec(model_dirs["translator"], "t", engine="torch")
    return TestClient(create_app([spec], access=access, frontend=frontend))


def _new_key(db: Path) -> str:
    from aiayn.serve.keys import KeyStore

    store = KeyStore(db)
    key, _ = store.add()
    store.close()
    return key


def test_a_key_in_any_spelling_the_guard_reads_stays_out_of_the_access_log(model_dirs, tmp_path):
    """``%61pi_key=KEY`` and ``api%5Fkey=KEY`` were authorised and logged in clear."""
    key = _new_key(tmp_path / "keys.db")
    encoded = "".join(f"%{b:02X}" for b in key.encode())  # the same key to the guard
    port = free_port()
    proc = _serve(
        str(model_dirs["translator"]), "--port", str(port), "--engine", "torch", "--access-log",
        "--api-keys", "--api-keys-db", str(tmp_path / "keys.db"),
    )  # fmt: skip
    try:
        wait_process_ready(port, proc)
        pair = "q=Ja.&source=de&target=en"
        for name in KEY_SPELLINGS:
            for value in (key, encoded):
                target = f"/translate?{name}={value}&{pair}"
                assert _status(port, "POST", target) == 200, target  # read as the key
        assert _status(port, "POST", f"/translate?{pair}") == 400  # no key: refused
        bearer = {"Authorization": f"Bearer {key}"}  # as OpenAI's clients send it
        assert _status(port, "POST", "/v1/translate", {"text": "Ja."}, bearer) == 200
        proc.terminate()
        assert proc.wait(60) == 0
        log = proc.stdout.read()
        assert key not in log and encoded not in log
        lines = [line for line in log.splitlines() if "POST /translate?" in line]
        assert len(lines) == 2 * len(KEY_SPELLINGS) + 1, lines
        for name in KEY_SPELLINGS:
            assert sum(f"?{name}=REDACTED&{pair}" in line for line in lines) == 2, name
        assert '"POST /v1/translate HTTP/1.1" 200' in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-~")
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@st.composite
def _spelled(draw, text: str) -> str:
    """``text`` as a client may write it in a query string: each character as it is (where
    that means itself) or percent-encoded, in either case of hex digit."""
    out = []
    for ch in text:
        if ch in _PLAIN and draw(st.booleans()):
            out.append(ch)
        else:
            upper = draw(st.booleans())
            out.append("".join(f"%{b:02X}" if upper else f"%{b:02x}" for b in ch.encode()))
    return "".join(out)


@st.composite
def _queries(draw) -> tuple[str, list[tuple[str, str]]]:
    names = st.sampled_from(["api_key", "API_Key", "q", "source", "api_keys", "xapi_key"])
    fields = draw(st.lists(st.tuples(names | _TEXT, _TEXT), max_size=6))
    spelled = [f"{draw(_spelled(n))}={draw(_spelled(v))}" for n, v in fields]
    return "&".join(spelled), fields


@given(_queries())
def test_the_log_reads_the_query_as_the_access_check_does(query_and_fields):
    """Every field the access check would read as the key is redacted, however its name and
    value are spelled; every other field is left as it was."""
    query, fields = query_and_fields
    redacted = redact_query(query)
    read = [(name, value) for _, name, value in query_items(redacted)]
    assert read == [(n, "REDACTED" if is_key_field(n) and v else v) for n, v in fields]


def test_a_key_after_a_semicolon_is_redacted_too():
    assert redact_query("q=Ja;%61pi_key=SECRET&x=1") == "q=Ja;%61pi_key=REDACTED&x=1"
    assert redact_query("api_key&API_KEY=") == "api_key&API_KEY="  # no value: nothing to hide


@contextmanager
def _redis(directory, password: str):
    """redis://:PASSWORD@127.0.0.1:PORT of a redis-server that requires ``password``."""
    redis = pytest.importorskip("redis")
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("no redis-server on PATH: scripts/setup.sh installs Debian's redis-server")
    port = free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--requirepass", password],
        cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        client = redis.Redis(host="127.0.0.1", port=port, password=password)
        for _ in range(400):
            assert proc.poll() is None, "redis-server exited"
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        client.close()
        yield f"redis://:{password}@127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(20)


PASSWORD = "Pa55-w0rd-for-redis"


def test_a_storage_password_is_masked_in_the_start_up_error(model_dirs, capsys):
    url = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}"  # nothing listens there
    argv = ["serve", str(model_dirs["translator"]), "--port", "0", "--engine", "torch"]
    assert main([*argv, "--req-limit", "5", "--shared-storage", url]) == 2
    out = capsys.readouterr()
    assert PASSWORD not in out.out + out.err
    assert "--shared-storage redis://:***@127.0.0.1:" in out.err and "no answer" in out.err


@pytest.mark.parametrize(
    "url, why",
    [
        (f"redis//:{PASSWORD}@127.0.0.1:{{port}}", "'redis//:***@127.0.0.1:"),  # no scheme
        (f"redis://user:{PASSWORD}@127.0.0.1:port", "--shared-storage redis://user:***@"),
        (f"redis://127.0.0.1:{{port}}?password={PASSWORD}", "?password=***: no answer"),
    ],
)
def test_a_storage_password_is_masked_in_other_start_up_errors(model_dirs, url, why):
    from aiayn.serve.access import AccessConfig

    url = url.replace("{port}", str(free_port()))
    with pytest.raises(ValueError) as refused:
        access = AccessConfig(req_limit=3, shared_storage=url)
        _translator(model_dirs, access=access)
    assert why in str(refused.value) and PASSWORD not in str(refused.value), refused.value


def test_a_storage_password_is_kept_out_of_the_log_while_serving(model_dirs, tmp_path, caplog):
    from aiayn.serve.access import AccessConfig

    with _redis(tmp_path, PASSWORD) as (url, proc):
        access = AccessConfig(req_limit=3, shared_storage=url)
        with _translator(model_dirs, access=access) as c:
            wait_ready(c)
            body = {"q": "Ja.", "source": "de", "target": "en"}
            assert c.post("/translate", json=body).status_code == 200  # counted with it
            proc.terminate()
            proc.wait(20)
            with caplog.at_level("ERROR", logger="aiayn.serve"):
                r = c.post("/translate", json=body)
    assert r.status_code == 503 and PASSWORD not in r.text
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "request limits cannot be counted (--shared-storage redis://:***@127.0.0.1:" in logged
    assert PASSWORD not in logged


def _host_paths(model_dirs) -> list[str]:
    """The directories a client must not learn: each model's, and the one above them all."""
    return [*(str(p) for p in model_dirs.values()), str(Path(model_dirs["lm"]).parent.parent)]


def test_routes_without_a_key_name_models_never_directories(client, model_dirs):
    """``GET /v1/models`` answered each model's absolute directory."""
    models = client.get("/v1/models").json()["data"]
    assert sorted(m["id"] for m in models) == ["de-en", "lm", "sentiment"]
    assert all("path" not in m for m in models)
    targets = ["/health", "/languages", "/frontend/settings", "/v1/models", "/openapi.json",
               "/spec", "/docs", "/", "/v1/models/nope", "/nowhere", "/download_file/x"]  # fmt: skip
    targets += [f"/v1/models/{m['id']}" for m in models]
    for target in targets:
        r = client.get(target)
        assert r.status_code < 500, (target, r.text)
        for path in _host_paths(model_dirs):
            assert path not in r.text, (target, path)


def test_an_ensemble_names_its_members_not_their_directories(model_dirs):
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.server import model_specs

    path = str(model_dirs["translator"])
    specs = model_specs([path, path], ensemble=True, engine="torch")
    with TestClient(create_app(specs)) as c:
        wait_ready(c)
        (model,) = c.get("/v1/models").json()["data"]
    assert model["ensemble"] == ["de-en", "de-en"]
    assert path not in json.dumps(model)


def test_a_failed_load_is_told_without_the_hosts_directories(model_dirs, tmp_path):
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    broken = tmp_path / "de-en"
    shutil.copytree(model_dirs["translator"], broken)
    (broken / "model.safetensors").write_bytes(b"not the weights")
    spec = ModelSpec(broken, "broken", engine="torch")
    with TestClient(create_app([spec], background=False)) as c:
        health = c.get("/health")
        translated = c.post("/translate", json={"q": "Ja.", "source": "de", "target": "en"})
    assert health.status_code == 500 and translated.status_code == 500
    for r in (health, translated):
        assert "model.safetensors" in r.text and "damaged" in r.text, r.text  # still says why
        assert str(tmp_path) not in r.text, r.text


def test_a_path_in_an_error_is_written_as_its_last_part():
    message = (
        "runs/demo/model/config.json: bad; see '/srv/aiayn/de-en/run.json' and "
        "http://example.org/a/b (model.safetensors)"
    )
    assert without_paths(message, {"runs/demo/model": "model"}) == (
        "model/config.json: bad; see 'run.json' and http://example.org/a/b (model.safetensors)"
    )


@pytest.fixture
def umask_022():
    """The usual umask, with which SQLite makes a new file readable by every user."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keys_add_makes_an_existing_database_owner_only(tmp_path, capsys, umask_022):
    db = tmp_path / "keys.db"
    assert main(["keys", "--db", str(db), "add"]) == 0
    companions = [tmp_path / f"keys.db{end}" for end in ("-journal", "-wal", "-shm")]
    for file in (db, *companions):  # left readable to all (by hand, or an older version)
        file.touch()
        file.chmod(0o644)
    assert main(["keys", "--db", str(db), "add"]) == 0
    assert _mode(db) == 0o600
    assert all(_mode(f) == 0o600 for f in companions if f.exists())
    assert len(capsys.readouterr().out.split()) == 2  # two keys made, each printed once


def test_the_server_makes_its_databases_owner_only(model_dirs, tmp_path, umask_022):
    """The suggestions database was made 0644; a key database left 0644 stayed so."""
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.config import FrontendConfig

    keys, suggestions = tmp_path / "keys.db", tmp_path / "suggestions.db"
    key = _new_key(keys)
    keys.chmod(0o644)
    access = AccessConfig(api_keys=True, api_keys_db=str(keys))
    frontend = FrontendConfig(suggestions=True, suggestions_db=str(suggestions))
    with _translator(model_dirs, access=access, frontend=frontend) as c:
        wait_ready(c)
        body = {"q": "Hallo", "s": "Hello", "source": "de", "target": "en", "api_key": key}
        assert c.post("/suggest", json=body).status_code == 200
        assert _mode(keys) == 0o600 and _mode(suggestions) == 0o600
    suggestions.chmod(0o644)  # an existing one, opened again
    with _translator(model_dirs, access=access, frontend=frontend) as c:
        assert _mode(suggestions) == 0o600


@pytest.mark.parametrize(
    "query, message",
    [
        ("q=%FF&source=de&target=en", "Invalid request: q is not valid UTF-8"),
        ("q=Ja.&source=%C3%28&target=en", "Invalid request: source is not valid UTF-8"),
        ("%FF=1&q=Ja.&source=de&target=en", "Invalid request: a field name is not valid UTF-8"),
    ],
)
def test_a_query_string_that_is_not_utf8_is_named(client, query, message):
    """It answered "missing q parameter"."""
    r = client.post(f"/translate?{query}")
    assert r.status_code == 400 and r.json()["error"].startswith(message), r.text
