"""Request limits shared through Redis (``--shared-storage redis://``): a real redis-server,
started on a free loopback port and stopped after (scripts/setup.sh installs Debian's
package); two ``aiayn serve`` processes on it count one client's requests once."""

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from tests.conftest import REPO_ROOT
from tests.serve.conftest import make_client, wait_process_ready, wait_ready

pytest.importorskip("limits")
pytest.importorskip("redis")

REDIS = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _redis_server(directory):
    """redis://127.0.0.1:PORT of a redis-server run in ``directory`` (nothing saved)."""
    if REDIS is None:
        pytest.skip("no redis-server on PATH: scripts/setup.sh installs Debian's redis-server")
    import redis

    port = free_port()
    proc = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, "redis-server exited"
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not answer"
                time.sleep(0.05)
        client.close()
        yield f"redis://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(20)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """redis://127.0.0.1:PORT of a redis-server run for these tests (nothing saved to disk)."""
    with _redis_server(tmp_path_factory.mktemp("redis")) as (url, _):
        yield url


def _flush(url: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        client.flushall()


def test_two_apps_on_one_redis_count_once(model_dirs, redis_url):
    from aiayn.serve.access import AccessConfig

    _flush(redis_url)
    access = AccessConfig(req_limit=3, shared_storage=redis_url)
    one = {"t": model_dirs["translator"]}
    with make_client(one, access=access) as a, make_client(one, access=access) as b:
        wait_ready(a)
        wait_ready(b)
        codes = [
            c.post("/translate", json={"q": "Ja.", "source": "de", "target": "en"}).status_code
            for c in (a, b, a, b, a)
        ]
        assert codes == [200, 200, 200, 429, 429]
        r = b.post("/v1/translate", json={"text": "Ja."})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1


def test_wrong_keys_are_counted_once_on_one_redis(model_dirs, redis_url, tmp_path):
    """--key-failures-limit counts in the same storage as the request limits: one address's
    wrong keys sent to two servers add up, and both then refuse its keys (429)."""
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.keys import KeyStore

    _flush(redis_url)
    store = KeyStore(tmp_path / "keys.db")
    key, _ = store.add()
    store.close()
    access = AccessConfig(
        api_keys=True,
        api_keys_db=str(tmp_path / "keys.db"),
        key_failures_limit=3,
        shared_storage=redis_url,
    )
    one = {"t": model_dirs["translator"]}
    with make_client(one, access=access) as a, make_client(one, access=access) as b:
        wait_ready(a)
        wait_ready(b)
        body = {"q": "Ja.", "source": "de", "target": "en", "api_key": "x" * 20}
        codes = [c.post("/translate", json=body).status_code for c in (a, b, a, b)]
        assert codes == [403, 403, 403, 429]
        r = a.post("/translate", json={**body, "api_key": key})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1


def test_keys_with_a_storage_gone_are_503_not_500(model_dirs, tmp_path):
    """With --api-keys the wrong keys count in the storage: a Redis gone makes a key's
    request a 503 with Retry-After, whether the key is right or wrong."""
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.keys import KeyStore

    store = KeyStore(tmp_path / "keys.db")
    key, _ = store.add()
    store.close()
    with _redis_server(tmp_path) as (url, proc):
        access = AccessConfig(
            api_keys=True, api_keys_db=str(tmp_path / "keys.db"), shared_storage=url
        )
        with make_client({"t": model_dirs["translator"]}, access=access) as c:
            wait_ready(c)
            body = {"q": "Ja.", "source": "de", "target": "en"}
            assert c.post("/translate", json={**body, "api_key": key}).status_code == 200
            proc.terminate()
            proc.wait(20)
            for given in (key, "x" * 20):
                r = c.post("/translate", json={**body, "api_key": given})
                assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1, r.text


def test_a_storage_that_does_not_answer_stops_the_start(model_dirs):
    from aiayn.serve.access import AccessConfig

    access = AccessConfig(req_limit=3, shared_storage=f"redis://127.0.0.1:{free_port()}")
    with pytest.raises(ValueError, match="no answer"):
        make_client({"t": model_dirs["translator"]}, access=access)


def test_a_storage_gone_while_serving_is_503_and_runs_no_model(model_dirs, tmp_path):
    from aiayn.serve.access import AccessConfig

    with _redis_server(tmp_path) as (url, proc):
        access = AccessConfig(req_limit=3, shared_storage=url)
        with make_client({"t": model_dirs["translator"]}, access=access) as c:
            wait_ready(c)
            assert (
                c.post("/translate", json={"q": "Ja.", "source": "de", "target": "en"}).status_code
                == 200
            )
            proc.terminate()
            proc.wait(20)
            batches = c.app.state.registry.metrics.registry.get_sample_value
            before = batches("aiayn_batch_texts_count", {"model": "t"})
            for path, body in (("/translate", {"q": "Ja.", "source": "de", "target": "en"}), ("/v1/translate", {"text": "Ja."})):  # fmt: skip
                r = c.post(path, json=body)
                assert r.status_code == 503, r.text
                assert "request limits cannot be counted now" in r.text
                assert "127.0.0.1" not in r.text and "Error" not in r.text  # no internals
                assert int(r.headers["Retry-After"]) >= 1
            assert batches("aiayn_batch_texts_count", {"model": "t"}) == before


def _post(port: int, path: str, body: dict) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    status = conn.getresponse().status
    conn.close()
    return status


def test_two_serve_processes_on_one_redis_count_once(model_dirs, redis_url, tmp_path):
    """Two ``aiayn serve`` processes, keys on, limits in one redis-server: a client that
    alternates between them is limited at the shared count; no key, no translation."""
    from aiayn.serve.keys import KeyStore

    _flush(redis_url)
    store = KeyStore(tmp_path / "keys.db")
    key, _ = store.add(req_limit=3)
    store.close()
    ports = [free_port(), free_port()]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aiayn.cli",
                "serve",
                str(model_dirs["translator"]),
                "--port",
                str(port),
                "--threads",
                "1",
                "--api-keys",
                "--api-keys-db",
                str(tmp_path / "keys.db"),
                "--shared-storage",
                redis_url,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for port in ports
    ]
    try:
        for port, proc in zip(ports, procs, strict=True):
            wait_process_ready(port, proc)
        body = {"q": "Ja.", "source": "de", "target": "en"}
        assert [_post(p, "/translate", body) for p in ports] == [400, 400]  # no key
        keyed = {**body, "api_key": key}
        codes = [_post(ports[i % 2], "/translate", keyed) for i in range(5)]
        assert codes == [200, 200, 200, 429, 429]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
            proc.stdout.close()
