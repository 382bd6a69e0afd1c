"""The serving page in a real browser: headless Chromium driven by Playwright.

Starts ``aiayn serve MODEL_DIR`` on 127.0.0.1, opens the page, types a sentence, presses
Translate, reads the translation and the attention heatmap, checks them against
``/v1/translate``, and saves a screenshot. Playwright drives the system's Chromium
(``--chromium``); it downloads no browser of its own.

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


def start_server(model_dir: Path, port: int, *flags: str) -> subprocess.Popen:
    """``aiayn serve`` in a child process, returned once ``/health`` says ready."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    command = [sys.executable, "-m", "aiayn.cli", "serve", str(model_dir), "--port", str(port)]
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
            page.fill("#text", sentence)
            page.fill("#beam", str(beam))
            page.click("#go")
            page.wait_for_selector("#heatmap td", timeout=120_000)
            shown = {
                "translation": page.text_content("#output"),
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
    problems = []
    if shown["errors"]:
        problems.append(f"JavaScript errors: {shown['errors']}")
    if shown["translation"] != want["translations"][0]["text"]:
        problems.append(f"page shows {shown['translation']!r}, /v1/translate gives {want}")
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
    args = parser.parse_args()
    port = free_port()
    server = start_server(Path(args.model_dir), port)
    try:
        shown = check_page(
            f"http://127.0.0.1:{port}/", args.sentence, args.chromium, Path(args.out)
        )
    finally:
        server.terminate()
        code = server.wait(60)
    print(json.dumps({**shown, "screenshot": args.out, "server_exit": code}, ensure_ascii=False))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
