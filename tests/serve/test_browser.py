"""The page in headless Chromium (skipped where no Chromium or playwright is installed;
``scripts/browser_setup.sh`` installs both). Marked slow: CI runs them in a step of their own,
after installing both, so that the default suite takes the same time on every machine."""

import contextlib
import importlib.util
import json
import shutil
import sqlite3
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.mark.skipif(not shutil.which("chromium"), reason="no chromium (scripts/browser_check.sh)")
def test_the_page_translates_and_draws_the_heatmap(model_dirs, tmp_path):
    pytest.importorskip("playwright.sync_api")
    spec = importlib.util.spec_from_file_location(
        "browser_check", REPO_ROOT / "scripts" / "browser_check.py"
    )
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    port = check.free_port()
    server = check.start_server(model_dirs["translator"], port)
    try:
        shown = check.check_page(
            f"http://127.0.0.1:{port}/", "Ich habe Hunger.", CHROMIUM, tmp_path / "page.png", beam=2
        )
    finally:
        server.terminate()
        assert server.wait(60) == 0
    assert shown["translation"] and shown["cells"] > 0  # check_page compared both with the API
    assert (tmp_path / "page.png").stat().st_size > 10_000


@pytest.mark.skipif(not shutil.which("chromium"), reason="no chromium (scripts/browser_check.sh)")
def test_at_phone_width_only_the_heatmap_scrolls_and_docs_work_offline(model_dirs, tmp_path):
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("swagger_ui_bundle")
    spec = importlib.util.spec_from_file_location(
        "browser_check", REPO_ROOT / "scripts" / "browser_check.py"
    )
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    port = check.free_port()
    server = check.start_server(model_dirs["translator"], port)
    url = f"http://127.0.0.1:{port}/"
    sentence = "Der Hund schläft heute lange im Garten, weil es warm ist."  # 19+ tokens here
    try:
        phone = check.check_phone_width(url, sentence, CHROMIUM, tmp_path / "phone.png")
        docs = check.check_docs(url, CHROMIUM, tmp_path / "docs.png")
    finally:
        server.terminate()
        assert server.wait(60) == 0
    assert phone["columns"] >= 19 and phone["heatmap"] > phone["heatmap_box"]  # it does scroll
    assert phone["page"] == phone["viewport"] == 390
    assert "/v1/models/{model_id}" in docs["routes"] and "/translate" in docs["routes"]


def _browser_check():
    spec = importlib.util.spec_from_file_location(
        "browser_check", REPO_ROOT / "scripts" / "browser_check.py"
    )
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    return check


def _reversed(model_dir, root):
    """A copy of ``model_dir`` served as en -> de: the pair the page's swap goes to."""
    copy = root / "en-de"
    shutil.copytree(model_dir, copy)
    run = json.loads((copy / "run.json").read_text())
    run["data"].update(src_lang="en", tgt_lang="de")
    (copy / "run.json").write_text(json.dumps(run))
    return copy


def _contrast(a: str, b: str) -> float:
    """WCAG's contrast ratio of two CSS ``rgb(r, g, b)`` colours."""

    def luminance(css: str) -> float:
        rgb = [int(c) / 255 for c in css[css.index("(") + 1 : css.index(")")].split(",")[:3]]
        rgb = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]

    light, dark = sorted([luminance(a), luminance(b)], reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _post(url, body, key):
    request = urllib.request.Request(
        url,
        json.dumps({**body, "api_key": key} if key else body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())


@pytest.mark.skipif(not shutil.which("chromium"), reason="no chromium (scripts/browser_check.sh)")
def test_a_translator_works_on_the_page_as_on_libretranslates(model_dirs, tmp_path):
    """Behind --api-keys: the page asks for the key and sends it; paragraphs keep their lines
    (LibreTranslate's /translate, sentence by sentence), alternatives are offered, the
    translation copies, a better one is suggested (--suggestions), a file comes back under its translated name, and swap goes to the
    reverse pair; nothing but the server is asked."""
    pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright

    from aiayn.serve.keys import KeyStore

    check = _browser_check()
    store = KeyStore(tmp_path / "keys.db")
    key = store.add()[0]
    store.close()
    port = check.free_port()
    both = [model_dirs["translator"], _reversed(model_dirs["translator"], tmp_path)]
    suggestions = tmp_path / "suggestions.db"
    flags = ("--api-keys", "--api-keys-db", str(tmp_path / "keys.db"), "--suggestions")
    server = check.start_server(both, port, *flags, "--suggestions-db", str(suggestions))
    url = f"http://127.0.0.1:{port}/"
    text = "Ich habe Hunger. Wo ist der Bahnhof?\n\nDas Buch ist gut."
    (tmp_path / "brief.txt").write_text("Das Buch ist gut.\n", "utf-8")
    try:
        want = _post(
            url + "translate", {"q": text, "source": "de", "target": "en", "alternatives": 1}, key
        )
        file_want = _post(
            url + "translate", {"q": "Das Buch ist gut.", "source": "de", "target": "en"}, key
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=check.CHROMIUM_ARGS)
            try:
                context = browser.new_context(  # a phone's width: nothing scrolls sideways
                    viewport={"width": 390, "height": 844},
                    permissions=["clipboard-read", "clipboard-write"],
                )
                page = context.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                refused = check.offline(page, url)
                page.goto(url)
                page.wait_for_selector("#model option", state="attached", timeout=60_000)
                started = page.input_value("#source")  # --frontend-language-source auto
                page.select_option("#source", "de")
                page.get_by_label("Text (German)").fill(text)  # a named box, in its language
                languages = (
                    page.get_attribute("#text", "lang"),
                    page.get_attribute("#output", "lang"),
                )
                page.click("#go")
                page.wait_for_selector("#output.error", timeout=60_000)
                no_key = page.text_content("#output")
                page.fill("#api-key", key)
                page.select_option("#alternatives", "1")
                page.press("#text", "Control+Enter")  # the keyboard runs it too
                page.wait_for_selector("#copy:not([hidden])", timeout=60_000)
                shown = page.text_content("#output")
                alternatives = page.locator("#alternatives-list button").all_text_contents()
                page.click("#copy")
                copied = page.evaluate("navigator.clipboard.readText()")
                page.click("#suggest")
                page.fill("#suggestion", "I am hungry.")
                page.click("#send-suggestion")
                page.wait_for_selector("#suggest-result:has-text('Thank you')", timeout=30_000)
                page.set_input_files("#file", str(tmp_path / "brief.txt"))
                page.click("#go-file")
                page.wait_for_selector("#download", timeout=60_000)
                with page.expect_download() as download:
                    page.click("#download")
                name = download.value.suggested_filename
                translated_file = Path(download.value.path()).read_text("utf-8")
                widths = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
                page.click("#swap")
                swapped = tuple(page.input_value(f"#{k}") for k in ("source", "target", "text"))
            finally:
                browser.close()
    finally:
        server.terminate()
        assert server.wait(60) == 0
    assert started == "auto" and "API key" in no_key and languages == ("de", "en")
    assert shown == want["translatedText"] and "\n\n" in shown  # its paragraphs kept
    assert alternatives == want["alternatives"] and copied == shown
    assert name == "brief_en.txt" and widths == [390, 390]
    assert translated_file == file_want["translatedText"] + "\n"
    assert swapped == ("en", "de", shown)
    with contextlib.closing(sqlite3.connect(suggestions)) as db:
        stored = db.execute("SELECT q, s, source, target FROM suggestions").fetchall()
    assert stored == [(text, "I am hungry.", "de", "en")]
    assert not errors and not refused


@pytest.mark.skipif(not shutil.which("chromium"), reason="no chromium (scripts/browser_check.sh)")
def test_the_page_shows_limits_glossary_html_and_clears_for_an_empty_box(model_dirs, tmp_path):
    """The character count against --char-limit, the server's 400 and 429 (with when to try
    again) shown in its words, translation as one types (LibreTranslate's page's), a glossary
    and HTML sent as /translate takes them, and an empty box leaving no stale translation."""
    pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright

    check = _browser_check()
    port = check.free_port()
    flags = ("--char-limit", "40", "--req-limit", "9")  # room for a pause in typing
    server = check.start_server(model_dirs["translator"], port, *flags)
    url = f"http://127.0.0.1:{port}/"
    body = {"source": "de", "target": "en"}
    try:
        typed = _post(url + "translate", {**body, "q": "Das Buch ist gut."}, None)
        glossed = _post(
            url + "translate", {**body, "q": "Das Buch.", "glossary": {"Buch": "tome"}}, None
        )
        html = _post(
            url + "translate", {**body, "q": "<p>Das <b>Buch</b>.</p>", "format": "html"}, None
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=check.CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                check.offline(page, url)
                page.goto(url)
                page.wait_for_selector("#model option", state="attached", timeout=60_000)

                def run(text: str) -> str:
                    page.fill("#text", text)
                    page.click("#go")
                    page.wait_for_function("!document.querySelector('#go').disabled")
                    return page.text_content("#output")

                page.click("#text")
                page.keyboard.press("Tab")  # the keyboard's focus is seen
                ring = page.evaluate(
                    """() => { const e = document.activeElement, s = getComputedStyle(e);
                               return [e.id, s.outlineStyle, parseFloat(s.outlineWidth),
                                       s.outlineColor]; }"""
                )
                page.fill("#text", "x" * 41)  # too long: not sent as one types
                count = (page.text_content("#count"), page.get_attribute("#count", "class"))
                too_long = run("x" * 41)
                page.fill("#text", "")
                page.type("#text", "Das Buch ist gut.")  # translated after a pause, unasked
                page.wait_for_function(
                    "t => document.querySelector('#output').textContent === t",
                    arg=typed["translatedText"],
                    timeout=30_000,
                )
                page.click("#glossary-box summary")
                page.fill("#glossary", "Buch = tome")
                shown_glossed = run("Das Buch.")
                page.fill("#glossary", "")
                page.select_option("#format", "html")
                shown_html = run("<p>Das <b>Buch</b>.</p>")
                page.select_option("#format", "text")
                run("")
                empty = page.text_content("#output")
                limited = [run("Das Buch.") for _ in range(6)][-1]
            finally:
                browser.close()
    finally:
        server.terminate()
        assert server.wait(60) == 0
    assert shown_glossed == glossed["translatedText"] and "tome" in shown_glossed
    assert shown_html == html["translatedText"] and "<b>" in shown_html
    assert empty == ""
    assert ring[:2] == ["alternatives", "solid"] and ring[2] >= 2
    assert _contrast(ring[3], "rgb(255, 255, 255)") >= 3  # WCAG 1.4.11 for the ring
    assert count[0] == "41 / 40" and "over" in count[1]
    assert too_long == "Invalid request: request (41) exceeds text limit (40)"
    assert limited.startswith("Slowdown: 9 per 1 minute (try again in ")


@pytest.mark.skipif(not shutil.which("chromium"), reason="no chromium (scripts/browser_check.sh)")
def test_the_page_offers_every_pair_and_pivot_with_auto_first(pair_dirs, tmp_path):
    """Three pairs sharing English (served lazily): the From picker starts with auto, then
    every language that translates into another; To offers what the chosen one reaches,
    directly or through English; a pivoted pair translates as /translate answers it, with no
    attention map (no one model's), and swap only where the reverse is served."""
    pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright

    check = _browser_check()
    port = check.free_port()
    server = check.start_server(list(pair_dirs.values()), port, "--engine", "torch")
    url = f"http://127.0.0.1:{port}/"
    text = "Das Buch ist gut."
    try:
        want = _post(url + "translate", {"q": text, "source": "de", "target": "fr"}, None)
        english = _post(
            url + "translate", {"q": "The book.", "source": "auto", "target": "es"}, None
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=check.CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                refused = check.offline(page, url)
                page.goto(url)
                page.wait_for_selector("#source option", state="attached", timeout=60_000)

                def options(select: str) -> list[str]:
                    return page.eval_on_selector_all(
                        f"{select} option", "os => os.map(o => o.value)"
                    )

                sources, model_box = options("#source"), page.is_hidden("#model-box")
                page.select_option("#source", "de")
                targets_de = options("#target")
                page.select_option("#target", "fr")
                pivot_view = (page.is_hidden("#attention-box"), page.is_hidden("#swap"))
                page.fill("#text", text)
                page.click("#go")
                page.wait_for_selector("#copy:not([hidden])", timeout=60_000)
                shown = page.text_content("#output")
                page.select_option("#source", "en")
                targets_en = options("#target")
                page.select_option("#target", "es")
                direct_view = (page.is_hidden("#attention-box"), page.is_hidden("#swap"))
                page.select_option("#source", "auto")
                page.select_option("#target", "es")
                page.fill("#text", "The book.")
                page.click("#go")
                page.wait_for_selector("#copy:not([hidden])", timeout=60_000)
                detected = (page.text_content("#output"), page.text_content("#detected"))
                page.screenshot(path=str(tmp_path / "pairs.png"), full_page=True)
            finally:
                browser.close()
    finally:
        server.terminate()
        assert server.wait(60) == 0
    assert sources == ["auto", "de", "en"] and model_box  # only translators: no model picker
    assert targets_de == ["en", "fr", "es"] and targets_en == ["fr", "es"]
    assert pivot_view == (True, True)  # de -> fr: through en, no reverse
    assert direct_view == (False, True)  # en -> es: a model's (a map), no es -> en
    assert shown == want["translatedText"]
    assert detected == (english["translatedText"], "detected: English")
    assert not errors and not refused
