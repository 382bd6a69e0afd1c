"""LibreTranslate's file translation over HTTP: ``POST /translate_file`` and ``GET
/download_file/NAME`` with LibreTranslate's own API tests re-expressed (its status codes and
messages), a document's paragraphs translated as ``/translate`` translates them, hostile
uploads answered 4xx with a message, a bounded store whose files expire, names outside it
refused, and a server that answers others while a document translates."""

import logging
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.documents import samples
from tests.documents.hostile import CASES
from tests.serve.conftest import live_server, make_client, wait_ready

pytest.importorskip("fastapi")
pytest.importorskip("docx")


def translators_only(model_dirs) -> dict:
    return {"translator": model_dirs["translator"]}


@pytest.fixture(scope="module")
def client(model_dirs):
    # an archive inflates to at most 50 times the body: 15 MB, which hostile.py's bombs pass
    limits = dict(max_body_bytes=300_000, max_file_chars=50_000)
    with make_client(translators_only(model_dirs), **limits) as c:
        wait_ready(c)
        yield c


def post(client, name: str, data: bytes, source="de", target="en", **fields):
    form = {k: v for k, v in {"source": source, "target": target, **fields}.items() if v}
    return client.post("/translate_file", data=form, files={"file": (name, data)})


def download(client, response):
    url = response.json()["translatedFileUrl"]
    return client.get(url[url.index("/download_file") :])


def store_of(client) -> Path:
    from aiayn.serve.files import app_files

    return app_files(client.app).store.directory  # made here if no upload came first


# --- LibreTranslate's tests (tests/test_api/test_api_translate_file.py), over HTTP ---------


def test_api_translate_file(client):
    response = post(client, "test.txt", b"Hallo Welt, das ist ein Test.")
    assert response.status_code == 200
    assert "translatedFileUrl" in response.json()


def test_api_translate_file_and_download(client):
    response = post(client, "test.txt", b"Hallo Welt, das ist ein Test.")
    got = download(client, response)
    assert got.status_code == 200
    assert len(got.content) > 0 and got.content != b"Hallo Welt, das ist ein Test."
    # LibreTranslate: "attachment; filename=test_en.txt" (the target language's code added)
    assert 'filename="test_en.txt"' in got.headers["content-disposition"]


def test_api_translate_file_missing_file(client):
    response = client.post("/translate_file", data={"source": "de", "target": "en"})
    assert response.status_code == 400
    assert response.json() == {"error": "Invalid request: missing file parameter"}


@pytest.mark.parametrize("field", ["source", "target"])
def test_api_translate_file_missing_language(client, field):
    response = post(client, "test.txt", b"Hallo", **{field: None})
    assert response.status_code == 400
    assert response.json() == {"error": f"Invalid request: missing {field} parameter"}


def test_api_translate_file_unsupported_format(client):
    response = post(client, "program.exe", b"MZ\x90\x00")
    assert response.status_code == 400
    assert response.json() == {"error": "Invalid request: file format not supported"}


@pytest.mark.parametrize("source, target", [("de", "zz"), ("zz", "en")])
def test_api_translate_file_unsupported_language(client, source, target):
    response = post(client, "test.txt", b"Hallo", source=source, target=target)
    assert response.status_code == 400
    assert response.json() == {"error": "zz is not supported"}


@pytest.mark.parametrize(
    "files, fields, message",
    [
        ([("file", ("a.txt", b"Hallo")), ("file", ("b.txt", b"Welt"))], {}, "Too many files"),
        ([("file", ("a.txt", b"Hallo"))], {f"x{k}": "1" for k in range(20)}, "Too many fields"),
    ],
    ids=["two files", "twenty more fields"],
)
def test_a_form_past_the_route_s_limits_is_refused(client, files, fields, message):
    """One file and 16 fields at most (the access check reads the form with these limits,
    and the route gets that form)."""
    data = {"source": "de", "target": "en", **fields}
    response = client.post("/translate_file", data=data, files=files)
    assert response.status_code == 400
    assert message in response.json()["error"]
    # /translate's forms keep Starlette's limits
    many = {"q": "Hallo", "source": "de", "target": "en", **fields}
    assert client.post("/translate", data=many).status_code == 200


def test_api_translate_file_auto_detect_source(client):
    response = post(client, "test.txt", b"Hallo Welt.", source="auto")
    assert response.status_code == 200 and "translatedFileUrl" in response.json()


def test_api_translate_file_error_returns_500(client, monkeypatch):
    (model,) = client.app.state.registry.models.values()

    def broken(*args, **kwargs):
        raise RuntimeError("file translation failed")

    monkeypatch.setattr(model, "translate", broken)
    response = post(client, "test.txt", b"Hallo")
    assert response.status_code == 500
    assert "file translation failed" in response.json()["error"]


def test_api_translate_file_char_limit(model_dirs):
    """--max-chars bounds /translate's texts, not a document's (as LibreTranslate's
    --char-limit); --max-file-chars bounds those."""
    with make_client(translators_only(model_dirs), max_chars=5, max_file_chars=30) as c:
        wait_ready(c)
        assert post(c, "test.txt", b"Hallo Welt, das ist ein Test.").status_code == 200
        refused = post(c, "test.txt", b"Hallo Welt, das ist ein langer Test.")
        assert refused.status_code == 400
        assert refused.json()["error"] == "test.txt: 36 characters of text; at most 30"


def test_api_translate_file_disabled(model_dirs):
    with make_client(translators_only(model_dirs), disable_files_translation=True) as c:
        wait_ready(c)
        response = post(c, "test.txt", b"Hallo")
        assert response.status_code == 403
        assert response.json() == {"error": "Files translation are disabled on this server."}
        assert c.get("/download_file/anything.txt").status_code == 400
        settings = c.get("/frontend/settings").json()
        assert settings["supportedFilesFormat"] == [] and not settings["filesTranslation"]


def raw_get(port: int, target: str) -> tuple[int, bytes]:
    """GET ``target`` sent as written (a client library would resolve ``..`` first)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.fixture(scope="module")
def port(model_dirs):
    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    path = model_dirs["translator"]
    app = create_app([ModelSpec(path, "translator")], ServeConfig(), background=False)
    with live_server(app) as number:
        yield number


@pytest.mark.parametrize(
    "target",
    [
        "/download_file/..",  # LibreTranslate's test_api_download_file_path_traversal
        "/download_file/../../etc/passwd",
        "/download_file/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/download_file/%2E%2E/x.txt",
        "/download_file//etc/passwd",
        "/download_file/..%5c..%5cwin.ini",
        "/download_file/0123456789abcdef0123456789abcdef.txt%00.html",
        "/download_file/test.txt",
        "/download_file/" + "a" * 5000,
    ],
)
def test_api_download_file_path_traversal(port, target):
    status, body = raw_get(port, target)
    assert status in (400, 404), body
    if status == 400:
        assert body == b'{"error":"Invalid filename"}'


def test_a_name_the_store_could_have_made_but_did_not_is_not_found(client):
    response = client.get("/download_file/0123456789abcdef0123456789abcdef.txt")
    assert response.status_code == 404 and response.json() == {"error": "File not found"}


# --- aiayn's -------------------------------------------------------------------------------


@pytest.mark.parametrize("ext", [".docx", ".odt", ".pptx", ".srt"])
def test_a_document_translates_as_translate_does(client, ext):
    build, texts = samples.FORMATS[ext]
    source = texts(build())
    got = download(client, post(client, f"doc{ext}", build()))
    assert got.status_code == 200
    expected = []
    for text in source:
        answer = client.post("/translate", json={"q": text, "source": "de", "target": "en"})
        expected.append(" ".join(answer.json()["translatedText"].split()))
    assert [" ".join(t.split()) for t in texts(got.content)] == expected


@pytest.mark.parametrize("label, name, data, message", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_upload_is_answered_4xx_with_a_message(client, caplog, tmp_path, monkeypatch,
                                                         label, name, data, message):  # fmt: skip
    monkeypatch.chdir(tmp_path)  # where a file written by a relative name would land
    before = set(store_of(client).iterdir())
    start = time.monotonic()
    response = post(client, name, data)
    assert time.monotonic() - start < 20
    assert 400 <= response.status_code < 500, response.text
    error = response.json()["error"]
    assert error.startswith(f"{name}: ") or "request body over" in error, error
    if "inflates past" in message:  # refused for what it is, under the server's own cap
        assert "inflates past 15000000 bytes" in error
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert set(store_of(client).iterdir()) == before
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "name, why",
    [
        ("../../evil.txt", "a path, not a file name"),
        ("..\\..\\evil.txt", "a path, not a file name"),
        ("/etc/passwd.txt", "a path, not a file name"),
        ("..", "'..' is no file name"),
        ("x" * 300 + ".txt", "304 characters; at most 255"),
    ],
)
def test_an_upload_name_that_is_a_path_is_refused(client, tmp_path, monkeypatch, name, why):
    monkeypatch.chdir(tmp_path)
    response = post(client, name, b"Hallo")
    assert response.status_code == 400
    assert response.json()["error"] == f"Invalid filename: {why}"
    assert list(tmp_path.iterdir()) == []


def test_stored_names_are_generated_and_the_download_name_is_cleaned(client):
    response = post(client, "%2e%2e%2fmein <Brief>.txt", b"Hallo Welt.")
    url = response.json()["translatedFileUrl"]
    stored = url.rsplit("/", 1)[1]
    assert len(stored) == 36 and stored.endswith(".txt") and "Brief" not in stored
    assert (store_of(client) / stored).is_file()
    got = download(client, response)
    assert "''_2e_2e_2fmein%20_Brief__en.txt" in got.headers["content-disposition"]


def test_files_expire_and_leave_nothing_behind(model_dirs):
    with make_client(translators_only(model_dirs), file_expiry=2) as c:
        wait_ready(c)
        response = post(c, "test.txt", b"Hallo Welt.")
        assert download(c, response).status_code == 200
        store = store_of(c)
        assert len(list(store.iterdir())) == 1
        deadline = time.monotonic() + 60  # removed when its time is up, unasked
        while list(store.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(store.iterdir()) == []
        assert download(c, response).status_code == 404
    assert not store.exists()  # the store's own directory goes at shutdown


def test_the_store_keeps_to_its_size_the_oldest_going_first(model_dirs, tmp_path):
    folder = tmp_path / "store"
    with make_client(
        translators_only(model_dirs), files_store_bytes=20_000, files_dir=str(folder)
    ) as c:
        wait_ready(c)
        answers = [post(c, f"t{k}.txt", b"Hallo Welt.\n" * 40) for k in range(8)]
        sizes = [f.stat().st_size for f in folder.iterdir()]
        assert all(a.status_code == 200 for a in answers)
        assert 0 < sum(sizes) <= 20_000 and len(sizes) < 8
        assert download(c, answers[0]).status_code == 404
        assert download(c, answers[-1]).status_code == 200
    assert folder.is_dir() and list(folder.iterdir()) == []  # a given folder stays, emptied


def download_race(model_dirs, caplog, rounds: int, how: str, clients: int = 8) -> Counter:
    """``clients`` clients download one translated file over and over until it is gone
    (``how``: it expires, or an upload evicts it from a full store), ``rounds`` times on a
    real server: what they got (200 with the whole file, 404, anything else), and the
    tracebacks the server logged."""
    import httpx2 as httpx

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    text = ("Hallo Welt, das ist ein Test.\n" * 20).encode()
    with make_client(translators_only(model_dirs)) as c:  # the whole translated file
        wait_ready(c)
        whole = download(c, post(c, "t.txt", text)).content
    if how == "expiry":
        limits = dict(file_expiry=0.4)
    else:  # room for one file and a half: each upload removes the one before
        limits = dict(file_expiry=600, files_store_bytes=len(whole) * 3 // 2)
    config = ServeConfig(timeout=120, **limits)
    app = create_app([ModelSpec(model_dirs["translator"], "de-en")], config, background=False)
    got: Counter = Counter()
    with caplog.at_level(logging.WARNING), live_server(app) as port:
        base = f"http://127.0.0.1:{port}"

        def upload(http) -> str:
            form = {"source": "de", "target": "en"}
            response = http.post(
                f"{base}/translate_file", data=form, files={"file": ("t.txt", text)}
            )
            assert response.status_code == 200, response.text
            return response.json()["translatedFileUrl"]

        def fetch(url: str, started: threading.Barrier) -> None:
            with httpx.Client(timeout=60) as http:
                started.wait(60)
                while True:
                    try:
                        response = http.get(url)
                    except httpx.HTTPError as e:  # the answer cut short (or no answer)
                        got[f"cut: {type(e).__name__}"] += 1
                        continue
                    if response.status_code == 404:
                        got[404] += 1
                        return
                    ok = response.status_code == 200 and response.content == whole
                    got[200 if ok else f"{response.status_code} {response.text[:80]}"] += 1

        with httpx.Client(timeout=60) as http:
            for _ in range(rounds):
                url = upload(http)
                started = threading.Barrier(clients + 1)
                threads = [
                    threading.Thread(target=fetch, args=(url, started)) for _ in range(clients)
                ]
                for thread in threads:
                    thread.start()
                started.wait(60)
                if how == "eviction":
                    upload(http)  # takes the first file's place
                for thread in threads:
                    thread.join(120)
    got["tracebacks"] = len([r for r in caplog.records if r.exc_info])
    return got


@pytest.mark.parametrize("how", ["expiry", "eviction"])
def test_a_file_removed_while_clients_download_it_is_whole_or_404(model_dirs, caplog, how):
    """A download opens the stored file once and sends it from that handle: a file that
    expires or is evicted while 8 clients download it gives each the whole file or a 404,
    never a 500 or an answer cut short."""
    got = download_race(model_dirs, caplog, rounds=6, how=how)
    assert set(got) <= {200, 404, "tracebacks"} and got["tracebacks"] == 0, got
    assert got[404] == 6 * 8  # every client saw the file go


@pytest.mark.slow
@pytest.mark.parametrize("how", ["expiry", "eviction"])
def test_fifty_rounds_of_the_download_race(model_dirs, caplog, how):
    got = download_race(model_dirs, caplog, rounds=50, how=how)
    print(how, dict(got))  # pytest -s shows the counts
    assert set(got) <= {200, 404, "tracebacks"} and got["tracebacks"] == 0, got


def test_the_store_answers_while_a_file_is_written(tmp_path, monkeypatch):
    """``get`` and ``purge`` (the event loop's) do not wait for a file being written: the
    write is held here until they have answered."""
    from aiayn.serve.files import FileStore

    store = FileStore(tmp_path / "store", expiry=60, max_bytes=1_000_000)
    writing, release = threading.Event(), threading.Event()
    write = store._write

    def held(path, data):
        writing.set()
        assert release.wait(60)
        write(path, data)

    monkeypatch.setattr(store, "_write", held)
    names: list = []
    writer = threading.Thread(target=lambda: names.append(store.put(b"x", ".txt", "a.txt", "t")))
    writer.start()
    try:
        assert writing.wait(60)
        answers: list = []
        reader = threading.Thread(
            target=lambda: answers.append((store.get("0" * 32 + ".txt"), store.purge()))
        )
        reader.start()
        reader.join(30)
        assert answers == [(None, None)], "get waited for the write"
    finally:
        release.set()
        writer.join(60)
    assert store.get(names[0]).size == 1
    store.close()


def test_a_files_dir_is_one_server_s_alone(model_dirs, tmp_path):
    """A second server on the same --files-dir is refused at start, naming it (it would
    remove the first one's files); once the first stops, the folder is free again."""
    from aiayn.errors import UserError

    folder = tmp_path / "store"
    with make_client(translators_only(model_dirs), files_dir=str(folder)) as c:
        wait_ready(c)
        response = post(c, "test.txt", b"Hallo Welt.")
        with pytest.raises(UserError, match=f"--files-dir {folder}: in use by another"):
            make_client(translators_only(model_dirs), files_dir=str(folder))
        assert download(c, response).status_code == 200  # its file is still there
    with make_client(translators_only(model_dirs), files_dir=str(folder)) as c:
        wait_ready(c)
        assert post(c, "test.txt", b"Hallo Welt.").status_code == 200


def test_the_server_answers_others_while_a_document_translates(model_dirs, monkeypatch):
    """A document of 64 sentences goes to the model in 8 batches of 8, each made to take
    0.4 s more: meanwhile /health answers (the event loop is never held by a batch) and
    /translate between two batches, each before the document is done."""
    import httpx2 as httpx

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    lines = "\n".join(f"Das ist der Satz Nummer {k} im Buch." for k in range(64))
    path = model_dirs["translator"]
    config = ServeConfig(max_body_bytes=2_000_000, timeout=120, max_batch=8)
    app = create_app([ModelSpec(path, "translator")], config, background=False)
    with live_server(app) as number:
        (model,) = app.state.registry.models.values()
        translate = model.translate

        def slow(*args, **kwargs):
            time.sleep(0.4)
            return translate(*args, **kwargs)

        monkeypatch.setattr(model, "translate", slow)
        base = f"http://127.0.0.1:{number}"
        answer: list = []

        def translate_book():
            files = {"file": ("book.txt", lines.encode())}
            data = {"source": "de", "target": "en"}
            answer.append(httpx.post(f"{base}/translate_file", data=data, files=files,
                                     timeout=120))  # fmt: skip

        thread = threading.Thread(target=translate_book)
        thread.start()
        time.sleep(0.3)
        answered = []  # whether the document was still being translated at each answer
        while thread.is_alive() and len(answered) < 3:
            health = httpx.get(f"{base}/health", timeout=30)
            assert health.status_code == 200
            answered.append(not answer)
            one = httpx.post(f"{base}/translate", timeout=30,
                             json={"q": "Hallo", "source": "de", "target": "en"})  # fmt: skip
            assert one.status_code == 200
            answered.append(not answer)
        thread.join(120)
    assert answered and all(answered), "the document was translated before others were answered"
    assert answer and answer[0].status_code == 200, answer and answer[0].text


def test_upload_names_are_checked_and_cleaned():
    from aiayn.serve.files import _unfit_name, display_name

    assert _unfit_name("a\tb.txt") == "a control character in the name"
    assert _unfit_name("C:\\evil.txt") == "a path, not a file name"
    assert _unfit_name("Brief.docx") is None
    assert display_name("<b>Brief<b>.docx") == "_b_Brief_b_.docx"
    assert display_name("x" * 300 + ".docx") == "x" * 95 + ".docx"
    assert display_name("Grüße aus Köln.txt") == "Grüße aus Köln.txt"  # it was "Gr__e aus K_ln"


def test_the_serve_command_takes_the_file_flags():
    from aiayn.cli import build_parser

    parse = build_parser().parse_args
    args = parse(["serve", "m", "--disable-files-translation", "--file-expiry", "60"])
    assert args.disable_files_translation is True and args.file_expiry == 60.0
    assert parse(["serve", "m"]).disable_files_translation is False


def test_a_page_comes_back_declaring_the_target_language(client):
    """The page said it was German; translated, it says it is the target language."""
    page = b'<!DOCTYPE html><html lang="de"><body><p lang="de">Das ist ein Haus.</p></body></html>'
    response = post(client, "page.html", page, source="de", target="en")
    assert response.status_code == 200, response.text
    html = download(client, response).text
    assert '<html lang="en">' in html and '<p lang="en">' in html
