"""A screenshot of TensorBoard showing a run's event files (docs/tensorboard.png): starts
``tensorboard`` on 127.0.0.1, opens it in Debian's headless Chromium through playwright, keeps
the loss, learning rate and speed cards, and saves the page.

    python scripts/tensorboard_screenshot.py RUN_DIR [--out docs/tensorboard.png]

Needs the tensorboard extra, /usr/bin/chromium and playwright (scripts/browser_check.sh
installs the last two).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/tensorboard.png"))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    logs = f"{args.run_dir.name}:{args.run_dir / 'tensorboard'}"
    server = subprocess.Popen(
        [Path(sys.executable).parent / "tensorboard", "--logdir_spec", logs,
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_page(viewport={"width": 1300, "height": 880})
            page.goto(url + "?darkMode=false#timeseries", wait_until="networkidle")
            page.wait_for_timeout(3000)
            page.get_by_role("button", name="Settings").first.click()  # it starts open
            page.fill("input[placeholder='Filter tags (regex)']", "loss$|lr$|tokens_per_s")
            page.keyboard.press("Escape")
            page.mouse.click(130, 700)  # away from the charts: no tooltip
            page.wait_for_timeout(4000)
            page.screenshot(path=str(args.out))
            browser.close()
    finally:
        server.terminate()
        server.wait(30)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
