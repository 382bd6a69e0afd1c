"""DeepL's Node client (deepl-node, installed by scripts/setup.sh into tests/serve/deepl_node)
against ``aiayn serve`` on 127.0.0.1 serving models/ding-de-en behind API keys: the calls of
tests/serve/deepl_node/scenario.js (form bodies, a GET with its query for the target
languages, multipart documents, v2 and v3 glossaries), their results checked here."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.serve.conftest import live_server

pytest.importorskip("fastapi")

NODE_DIR = Path(__file__).parent / "deepl_node"
NODE = shutil.which("node")
MODEL = REPO_ROOT / "models" / "ding-de-en"
TEXT, OTHER = "Das Haus ist klein.", "Wo ist der Bahnhof?"


@pytest.mark.skipif(NODE is None, reason="no node on PATH (deepl-node's test needs Node.js)")
def test_deepl_node_calls_answer_as_the_model_translates(tmp_path):
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.app import create_app
    from aiayn.serve.keys import KeyStore
    from aiayn.serve.models import ModelSpec

    if not (NODE_DIR / "node_modules" / "deepl-node").is_dir():
        pytest.skip("deepl-node is not installed: scripts/setup.sh installs it (with npm)")
    store = KeyStore(tmp_path / "keys.db")
    key, spent = store.add()[0], store.add(char_quota=5)[0]
    store.close()
    access = AccessConfig(api_keys=True, api_keys_db=str(tmp_path / "keys.db"))
    app = create_app([ModelSpec(MODEL, "ding", engine="torch")], access=access, background=False)
    (tmp_path / "brief.txt").write_text(f"{TEXT}\n", encoding="utf-8")
    with live_server(app) as port:
        model = app.state.registry.models["ding"]
        env = {
            **os.environ,
            "DEEPL_URL": f"http://127.0.0.1:{port}",
            "DEEPL_KEY": key,
            "DEEPL_WRONG_KEY": "not-one-of-the-servers-keys",
            "DEEPL_SPENT_KEY": spent,
            "TEXT": TEXT,
            "OTHER": OTHER,
            "TAGGED": 'Das <b>Haus</b> ist <x id="1"></x> klein.',
            "TERM": "Haus",
            "TARGET_TERM": "building",
            "DOC_IN": str(tmp_path / "brief.txt"),
            "DOC_OUT": str(tmp_path / "letter.txt"),
        }
        run = subprocess.run(
            [NODE, "scenario.js"], cwd=NODE_DIR, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        out = json.loads(run.stdout)
        want, other = (t.text for t in model.api.translate([TEXT, OTHER], scores=False))
    assert out["one"] == {"text": want, "detected": "de", "billed": len(TEXT)}
    assert out["many"] == [want, other]
    assert out["tagged"].count("<b>") == 1 and '<x id="1"></x>' in out["tagged"]
    assert out["sources"] == ["de"]
    assert out["targets"] == [["en-GB", False], ["en-US", False]]
    assert out["pairs"] == [["de", "en"]]
    assert out["glossary"] == {"ready": True, "count": 1, "time": True}
    assert out["listed"] is True and out["entries"] == {"Haus": "building"}
    assert "building" in out["with_glossary"] and "building" not in want
    assert out["deleted"] == "GlossaryNotFoundError"
    assert out["v3"] == [["de", "en", 1]] and out["v3_entries"] == {"Haus": "building"}
    assert out["document"] == {"done": True, "billed": len(TEXT)}
    assert (tmp_path / "letter.txt").read_text(encoding="utf-8") == f"{want}\n"
    used = 2 * len(TEXT) + len(OTHER) + len(env["TAGGED"]) + len(TEXT) + len(TEXT)
    assert out["usage"] == [used, 10**12]  # a key without a quota: DeepL's "no limit"
    assert out["wrong_key"] == "AuthorizationError"
    assert out["spent"] == "QuotaExceededError"
