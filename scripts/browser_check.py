"""The serving page in a real browser: headless Chromium driven by Playwright.

Starts ``aiayn serve MODEL_DIR`` on 127.0.0.1, opens the page, types a sentence, ticks
"Attention map", presses Translate, reads the translation and the attention heatmap, checks
them against ``/translate`` (the translation) and ``/v1/translate`` (the map's, at the map's
beam), and saves a screenshot. At phone width (390 px) the page must not scroll
sideways (a wide heatmap scrolls in its box), and ``/docs`` must show Swagger UI; the browser
reaches nothing but the server. Playwright drives the system's Chromium (``--chromium``); it
downloads no browser of its own.

    python scripts/browser_check.py models/ding-de-en --out docs/serve.png
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_dir: Path | list[Path], port: int, *flags: str) -> subprocess.Popen:
    """``aiayn serve`` of one model directory (or several) in a child process, returned once
    ``/health`` says ready."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    dirs = [str(d) for d in (model_dir if isinstance(model_dir, list) else [model_dir])]
    command = [sys.executable, "-m", "aiayn.cli", "serve", *dirs, "--port", str(port)]
    proc = subprocess.Popen(
        [*command, *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server stopped: {proc.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("the server did not become ready in 180 s")


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as r:
        return json.loads(r.read())


def offline(page, url: str) -> list[str]:
    """Let ``page`` reach only the server at ``url``; returns the addresses it was refused."""
    origin = "/".join(url.split("/")[:3])
    refused: list[str] = []

    def route(r):
        if r.request.url.startswith(origin):
            return r.continue_()
        refused.append(r.request.url)
        return r.abort()

    page.route("**/*", route)
    return refused


def named_source(page) -> None:
    """The first source language the page offers, where it starts from auto (the default
    --frontend-language-source): the attention map is one model's, shown for a named pair."""
    if page.input_value("#source") == "auto":
        page.select_option("#source", index=1)


def check_phone_width(
    url: str, sentence: str, chromium: str, screenshot: Path | None, width: int = 390
) -> dict:
    """The page at ``width`` px after translating ``sentence``: it must not scroll sideways;
    the heatmap's box scrolls instead. Returns the widths measured."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 844})
            refused = offline(page, url)
            page.goto(url)
            page.wait_for_selector("#model option", state="attached", timeout=60_000)
            named_source(page)
            page.fill("#text", sentence)
            page.check("#show-attention")
            page.click("#go")
            page.wait_for_selector("#heatmap td", timeout=120_000)
            shown = page.evaluate(
                """() => {
                    const box = document.querySelector(".heat-wrap");
                    return {page: document.documentElement.scrollWidth, viewport: innerWidth,
                            heatmap: box.scrollWidth, heatmap_box: box.clientWidth,
                            columns: document.querySelectorAll("#heatmap thead th").length - 1};
                }"""
            )
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    problems = []
    if shown["page"] > shown["viewport"]:
        problems.append(f"the page is {shown['page']} px wide in a {width} px window")
    if refused:
        problems.append(f"the page asked other hosts: {refused}")
    if problems:
        raise AssertionError("; ".join(problems))
    return shown


def check_docs(url: str, chromium: str, screenshot: Path | None) -> dict:
    """``/docs`` with no network but the server: Swagger UI lists the API's routes."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            refused = offline(page, url)
            page.goto(url.rstrip("/") + "/docs")
            page.wait_for_selector(".swagger-ui .opblock", timeout=60_000)
            shown = {
                "title": page.text_content(".swagger-ui .info .title"),
                "routes": page.locator(".swagger-ui .opblock-summary-path").all_text_contents(),
                "refused": refused,
            }
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot))
        finally:
            browser.close()
    if refused:
        raise AssertionError(f"/docs asked other hosts: {refused}")
    return shown


def check_page(
    url: str, sentence: str, chromium: str, screenshot: Path | None, beam: int = 4
) -> dict:
    """Translate ``sentence`` on the page at ``url``; returns what the page showed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            page.wait_for_selector("#model option", state="attached", timeout=60_000)
            named_source(page)
            page.fill("#text", sentence)
            page.check("#show-attention")
            page.fill("#beam", str(beam))
            page.click("#go")
            page.wait_for_selector("#heatmap td", timeout=120_000)
            shown = {
                "translation": page.text_content("#output"),
                "attention_translation": page.text_content("#attention-translation"),
                "rows": page.locator("#heatmap tbody tr").count(),
                "columns": page.locator("#heatmap thead th").count() - 1,
                "cells": page.locator("#heatmap td").count(),
                "errors": errors,
            }
            page.select_option("#head", "0")  # the selectors redraw the map
            shown["cells_one_head"] = page.locator("#heatmap td").count()
            page.select_option("#head", "mean")
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    api = post(url.rstrip("/") + "/v1/attention", {"text": sentence, "beam": beam})
    want = post(url.rstrip("/") + "/v1/translate", {"text": sentence, "beam": beam})
    with urllib.request.urlopen(url.rstrip("/") + "/v1/models", timeout=60) as r:
        source, target = json.loads(r.read())["data"][0]["languages"]
    plain = post(
        url.rstrip("/") + "/translate", {"q": sentence, "source": source, "target": target}
    )
    problems = []
    if shown["errors"]:
        problems.append(f"JavaScript errors: {shown['errors']}")
    if shown["translation"] != plain["translatedText"]:
        problems.append(f"page shows {shown['translation']!r}, /translate gives {plain}")
    if shown["attention_translation"] != want["translations"][0]["text"]:
        problems.append(
            f"the map is of {shown['attention_translation']!r}, /v1/translate gives {want}"
        )
    size = (len(api["output_tokens"]), len(api["source_tokens"]))
    if (shown["rows"], shown["columns"]) != size or shown["cells"] != size[0] * size[1]:
        problems.append(f"heatmap {shown['rows']}x{shown['columns']}, expected {size}")
    if shown["cells_one_head"] != shown["cells"]:
        problems.append("choosing a head changed the heatmap's size")
    if problems:
        raise AssertionError("; ".join(problems))
    return shown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default=str(ROOT / "models/ding-de-en"))
    parser.add_argument("--sentence", default="Ich habe heute keine Zeit, weil ich arbeiten muss.")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", default=str(ROOT / "docs/serve.png"), help="screenshot PNG")
    parser.add_argument("--phone-out", help="screenshot PNG of the page at 390 px")
    parser.add_argument("--docs-out", help="screenshot PNG of /docs")
    args = parser.parse_args()
    port = free_port()
    server = start_server(Path(args.model_dir), port)
    url = f"http://127.0.0.1:{port}/"
    try:
        shown = check_page(url, args.sentence, args.chromium, Path(args.out))
        phone = Path(args.phone_out) if args.phone_out else None
        shown["phone"] = check_phone_width(url, args.sentence, args.chromium, phone)
        docs = Path(args.docs_out) if args.docs_out else None
        shown["docs"] = check_docs(url, args.chromium, docs)
    finally:
        server.terminate()
        code = server.wait(60)
    print(json.dumps({**shown, "screenshot": args.out, "server_exit": code}, ensure_ascii=False))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
