"""The ``aiayn serve`` process: start-up errors, and a graceful SIGTERM."""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from aiayn.cli import main
from tests.conftest import REPO_ROOT
from tests.serve.conftest import wait_process_ready

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_model_directories_are_named(tmp_path, model_dirs, capsys):
    assert main(["serve", str(tmp_path / "nowhere")]) == 2
    assert "config.json" in capsys.readouterr().err
    lm = str(model_dirs["lm"])
    assert main(["serve", lm, "--name", "a", "--name", "b"]) == 2
    assert "2 --name for 1 model" in capsys.readouterr().err
    assert main(["serve", lm, "--languages", "de-en"]) == 2
    assert "one code" in capsys.readouterr().err
    assert main(["serve", lm, lm]) == 2
    assert "named 'lm'" in capsys.readouterr().err
    assert main(["serve", lm, "--beam", "9"]) == 2
    assert "beam" in capsys.readouterr().err


def test_a_runs_model_directory_is_named_after_the_run(tmp_path, model_dirs):
    import shutil

    from aiayn.serve.server import model_specs

    shutil.copytree(model_dirs["lm"], tmp_path / "moby" / "model")
    specs = model_specs([str(tmp_path / "moby" / "model"), str(model_dirs["lm"])], ["x"])
    assert [s.name for s in specs] == ["x", "lm"]
    specs = model_specs([str(tmp_path / "moby" / "model"), str(model_dirs["lm"])])
    assert [s.name for s in specs] == ["moby", "lm"]


def _completion_metrics(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    lines = conn.getresponse().read().decode().splitlines()
    return "\n".join(line for line in lines if line.startswith("aiayn_completion"))


def _a_client_that_goes_away_stops_its_generation(port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"prompt": "the", "max_tokens": 512, "temperature": 0, "stream": True}
    headers = {"Content-Type": "application/json"}
    conn.request("POST", "/v1/completions", json.dumps(body), headers)
    assert conn.getresponse().readline().startswith(b"data: {")
    conn.close()  # goes away after the first token
    deadline = time.monotonic() + 60
    while 'finish_reason="cancelled"' not in (text := _completion_metrics(port)):
        assert time.monotonic() < deadline, text
        time.sleep(0.05)
    tokens = float(text.split('aiayn_completion_tokens_total{model="lm"} ')[1].split()[0])
    assert tokens < 512, text


def test_sigterm_finishes_the_request_in_flight_and_exits_0(model_dirs):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT / 'src'}{os.pathsep}{REPO_ROOT}"}
    env["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, "-m", "aiayn.cli", "serve", str(model_dirs["lm"])]
    proc = subprocess.Popen(  # a long generation: still running when SIGTERM is handled
        [*command, "--port", str(port), "--max-new-tokens", "3000", "--metrics", "--metrics-open"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_process_ready(port, proc)
        _a_client_that_goes_away_stops_its_generation(port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        body = {"prompt": "the", "max_tokens": 3000, "temperature": 0, "stream": True}
        conn.request(
            "POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        assert response.status == 200
        first = response.readline()
        assert first.startswith(b"data: {")
        proc.send_signal(signal.SIGTERM)
        rest = response.read().decode()
        assert rest.rstrip().endswith("data: [DONE]")
        chunks = [json.loads(line[6:]) for line in rest.split("\n") if line.startswith("data: {")]
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        assert proc.wait(600) == 0
        log = proc.stdout.read()
        assert "Traceback" not in log
        assert "Waiting for connections to close" in log  # the request was still in flight
        assert "(httptools on uvloop; Ctrl-C to stop)" in log  # the serve extra's HTTP stack
        assert '"POST /v1/completions' not in log  # no access log without --access-log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_access_log_writes_a_line_for_each_request(model_dirs):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT / 'src'}{os.pathsep}{REPO_ROOT}"}
    command = [sys.executable, "-m", "aiayn.cli", "serve", str(model_dirs["translator"])]
    proc = subprocess.Popen(
        [*command, "--port", str(port), "--engine", "torch", "--access-log"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_process_ready(port, proc)
        for target in ("en", "zz"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            body = json.dumps({"q": "Ja.", "source": "de", "target": target})
            conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
            conn.getresponse().read()
            conn.close()
        secret = "a-key-for-the-query-string-0123"  # as a LibreTranslate client may send it
        for query in (f"api_key={secret}", f"q=Ja.&API%5Fkey={secret}&x=1"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("POST", f"/translate?{query}&source=de&target=en")
            conn.getresponse().read()
            conn.close()
        proc.terminate()
        assert proc.wait(600) == 0
        log = proc.stdout.read()
        lines = [line for line in log.splitlines() if "POST /translate" in line]
        assert len(lines) == 4, lines
        assert '"POST /translate HTTP/1.1" 200' in lines[0]
        assert '"POST /translate HTTP/1.1" 400' in lines[1]
        assert secret not in log  # never an API key in the log
        assert "POST /translate?api_key=REDACTED&source=de" in lines[2]
        assert "?q=Ja.&API%5Fkey=REDACTED&x=1&source" in lines[3]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_languages_flag_sets_a_models_languages(model_dirs):
    from aiayn.serve.models import ServedModel
    from aiayn.serve.server import model_specs

    (spec,) = model_specs([str(model_dirs["translator"])], languages=["fr-en"])
    assert ServedModel(spec).describe()["languages"] == ["fr", "en"]
    (spec,) = model_specs([str(model_dirs["translator"])])
    assert ServedModel(spec).describe()["languages"] == ["de", "en"]  # from run.json


def test_a_port_in_use_is_one_line_and_exit_2(model_dirs):
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT / 'src'}{os.pathsep}{REPO_ROOT}"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "aiayn.cli", "serve", str(model_dirs["translator"])]
        proc = subprocess.run(
            [*command, "--port", str(port)], env=env, capture_output=True, text=True, timeout=600
        )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0] and "--port" in lines[0]


def test_closing_the_registry_waits_for_the_model_being_loaded(model_dirs, monkeypatch):
    """A process that exits while a model loads in the background aborts in native code."""
    import aiayn.serve.registry as registry_module
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec, ServedModel

    specs = [ModelSpec(path, path.name) for path in model_dirs.values()]
    registry = registry_module.Registry(specs, ServeConfig())
    loading = threading.Event()

    def slow_load(spec, **options):  # the first model is still loading when close() is called
        loading.set()
        registry._closing.wait(600)
        return ServedModel(spec, **options)

    monkeypatch.setattr(registry_module, "ServedModel", slow_load)
    loader = registry.load_in_background()
    assert loading.wait(600)
    registry.close()
    assert not loader.is_alive()
    assert len(registry.models) == 1  # it finished the model being loaded, then stopped
    assert not registry.ready.is_set()


def test_accepted_connections_send_without_waiting_for_acks():
    """The listening socket names TCP, so asyncio (under uvicorn) sets TCP_NODELAY on every
    connection it accepts: a response's head and body, written apart, leave at once instead of
    the body waiting for the client's delayed ACK (~40 ms per keep-alive request)."""
    import asyncio

    from aiayn.serve.server import listen_socket

    async def nodelay_of_accepted() -> int:
        accepted: asyncio.Future = asyncio.get_running_loop().create_future()

        def on_connect(reader, writer):
            sock = writer.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=listen_socket("127.0.0.1", 0))
        port = server.sockets[0].getsockname()[1]
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            value = await asyncio.wait_for(accepted, 10)
            writer.close()
            await writer.wait_closed()
        return value

    assert asyncio.run(nodelay_of_accepted()) != 0


def test_decoding_threads_default_to_the_usable_cores_less_one(monkeypatch):
    from aiayn.serve.config import ServeConfig, serving_decoders, serving_threads

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5}, raising=False)
    assert serving_threads() == 5  # one core left to the event loop
    assert serving_decoders() == 2 and ServeConfig().model_decoders == 2
    assert serving_threads(2) == 2  # the five shared by two decoders
    assert ServeConfig(decoders=3).model_decoders == 3
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {3}, raising=False)
    assert serving_threads() == 1 and serving_threads(2) == 1  # at least one
    assert serving_decoders() == 1  # one core: one decoder
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 7}, raising=False)
    assert (serving_decoders(), serving_threads(2)) == (2, 1)  # two cores: two of one thread
    monkeypatch.delattr("os.sched_getaffinity", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert serving_threads() == 3  # no affinity here: the machine's cores


def test_threads_given_alone_keep_one_decoder_and_decoders_take_the_rest(model_dirs, monkeypatch):
    """`--threads N` alone is one decoder of N threads (as before there were decoders);
    without it, the default decoders; with both, both."""
    import torch

    from aiayn.serve import server

    seen = []
    monkeypatch.setattr(
        server, "run_server", lambda specs, config, *a, **k: seen.append(config.decoders)
    )
    threads = torch.get_num_threads()
    translator = str(model_dirs["translator"])
    try:
        assert main(["serve", translator, "--threads", "1"]) == 0
        assert main(["serve", translator]) == 0
        assert main(["serve", translator, "--threads", "1", "--decoders", "2"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert seen == [1, 0, 2]  # 0: the default, resolved for the machine's cores


LIBRARIES_SCRIPT = """
import json, sys
from pathlib import Path
from aiayn.serve.config import ServeConfig
from aiayn.serve.models import ModelSpec
from aiayn.serve.registry import Registry

def imported():
    return sorted(m for m in ("ctranslate2", "spacy") if m in sys.modules)

spec = ModelSpec(Path(sys.argv[1]), "de-en", cache_dir=Path(sys.argv[2]))
registry = Registry([spec], ServeConfig(preload="none"))
registry.load()
checked = imported()
registry.import_libraries()
print(json.dumps({"checked": checked, "ready": imported(), "loaded": len(registry.models),
                  "libraries": registry.entries["de-en"].facts.libraries}))
"""


def test_a_package_s_libraries_are_imported_once_the_server_is_ready(prenorm_package, tmp_path):
    """A package not loaded at start: its libraries (CTranslate2, its spaCy splitter) are
    imported after the start, before a request loads it (in a fresh process: whether a module
    was imported is the process's)."""
    pytest.importorskip("spacy")
    pytest.importorskip("ctranslate2")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-c", LIBRARIES_SCRIPT, str(prenorm_package), str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["libraries"] == ["ctranslate2", "spacy"]
    assert result["checked"] == []  # checking the package at start imports neither
    assert result["ready"] == ["ctranslate2", "spacy"]
    assert result["loaded"] == 0  # imported, not loaded
