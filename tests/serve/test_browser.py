"""The page in headless Chromium (skipped where no Chromium or playwright is installed;
``scripts/browser_check.sh`` installs both)."""

import importlib.util
import shutil

import pytest

from tests.conftest import REPO_ROOT

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

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
