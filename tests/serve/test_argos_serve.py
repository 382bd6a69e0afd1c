"""``aiayn serve --argos-packages DIR``: every pair Argos Translate installed, served over
LibreTranslate's API as a LibreTranslate user gets it.

The three packages of ``tests.interop.argos_fixtures`` (de -> en, en -> fr, en -> es: two share
English, so de -> fr and de -> es pivot) are installed by Argos Translate itself
(``argos_view``), which also translates the test sentences with its own code, once for the
module: the oracle. A real ``aiayn serve`` process serves that packages directory, a broken
package folder added beside them; positional ``.argosmodel`` files and CTranslate2 directories
are served in-process (``model_specs``, as the command builds its models).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.interop.argos_fixtures import NAMES, PAIRS, argos_view, ding_lines, package_name
from tests.serve.conftest import wait_process_ready, wait_ready

pytest.importorskip("fastapi")
pytest.importorskip("argostranslate", reason="Argos Translate is the reference here")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

DIRECT = [f"{s}-{t}" for s, t in PAIRS.values()]  # de-en, en-fr, en-es
PIVOTED = ["de-fr", "de-es"]
BROKEN = "translate-xx_yy-1_0"  # a package folder without its model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_sentence_lines(language: str, n: int = 8) -> list[str]:
    """Corpus lines that are one sentence to any splitter (no ., !, ? or … but at their end),
    as Argos Translate is asked to translate them here: each text one sentence."""
    lines = ding_lines(language, 400)[200:]
    return [t for t in lines if not any(c in t[:-1] for c in ".!?…")][:n]


@pytest.fixture(scope="module")
def installed(argos_packages, tmp_path_factory) -> dict:
    """The packages installed by Argos Translate into a packages directory of its own, a
    broken package folder added beside them, and Argos Translate's translations of the test
    sentences (CTranslate2 in the type the weights were saved in, as aiayn decodes them)."""
    home = tmp_path_factory.mktemp("argos-serve")
    packages = home / "packages"
    texts = {pair: one_sentence_lines(pair.split("-")[0]) for pair in DIRECT}
    view = argos_view(home, packages, list(argos_packages.values()), texts, "default")
    broken = packages / BROKEN
    broken.mkdir()
    (broken / "metadata.json").write_text(json.dumps({"from_code": "xx", "to_code": "yy"}))
    return {"home": home, "packages": packages, "texts": texts, "view": view}


def _environment(home: Path) -> dict[str, str]:
    """A server's environment: its caches and Argos Translate's settings under ``home``."""
    return {
        **os.environ,
        "PYTHONPATH": f"{REPO_ROOT / 'src'}{os.pathsep}{REPO_ROOT}",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "AIAYN_CACHE_DIR": str(home / "aiayn-cache"),
        "OMP_NUM_THREADS": "1",
    }


@pytest.fixture(scope="module")
def served(installed):
    """``aiayn serve --argos-packages DIR`` on a free port: (an httpx client, its log file)."""
    import httpx

    home = installed["home"]
    port = free_port()
    log = home / "server.log"
    command = [sys.executable, "-m", "aiayn.cli", "serve", "--argos-packages"]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*command, str(installed["packages"]), "--port", str(port), "--threads", "1"],
            env=_environment(home), stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        wait_process_ready(port, proc, 180)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client, log
    finally:
        proc.terminate()
        proc.wait(60)


def translate(client, q, source: str, target: str, **fields):
    r = client.post("/translate", json={"q": q, "source": source, "target": target, **fields})
    assert r.status_code == 200, r.text
    return r.json()["translatedText"]


def test_languages_lists_every_pair_with_the_packages_names(served, installed):
    client, _ = served
    r = client.get("/languages")
    assert r.status_code == 200
    ours = {lang["code"]: lang for lang in r.json()}
    theirs = {lang["code"]: lang for lang in installed["view"]["languages"]}
    assert set(ours) == set(theirs) == set(NAMES)  # the broken package's xx and yy are not
    for code, lang in ours.items():
        assert lang["name"] == theirs[code]["name"] == NAMES[code]  # metadata.json's names
        # Argos Translate's reachable languages, pivots included, and itself first
        assert lang["targets"][0] == code
        assert set(lang["targets"][1:]) == set(theirs[code]["to"])
    assert {"fr", "es"} <= set(ours["de"]["targets"])


def test_direct_pairs_answer_as_argos_translate(served, installed):
    """Argos Translate's settings (beam 4, length penalty 0.2, replace_unknowns) on the
    packages' own int8 models: the same texts, in a batch or alone."""
    client, _ = served
    for pair in DIRECT:
        source, target = pair.split("-")
        texts, want = installed["texts"][pair], installed["view"]["translations"][pair]
        assert translate(client, texts, source, target) == want, pair
        assert translate(client, texts[0], source, target) == want[0], pair


def test_pivoted_pairs_chain_two_packages(served, installed):
    """de -> fr is de -> en, then en -> fr (the first answer read by the second package as it
    reads a client's text): for every sentence whose English the second package reads whole;
    a longer English text (a random model's) is read as far as the model reads, not refused."""
    client, _ = served
    texts = installed["texts"]["de-en"]
    english = translate(client, texts, "de", "en")
    for pair in PIVOTED:
        target = pair.split("-")[1]
        pivoted = translate(client, texts, "de", target)
        assert len(pivoted) == len(texts)
        chained = 0
        for en, answer in zip(english, pivoted, strict=True):
            r = client.post("/translate", json={"q": en, "source": "en", "target": target})
            if r.status_code == 200:
                assert r.json()["translatedText"] == answer, pair
                chained += 1
            else:  # a word longer than en -> target reads
                assert r.status_code == 400 and "tokens" in r.json()["error"], r.text
        assert chained >= 2, f"{pair}: too few sentences to compare"


def test_html_and_files_for_every_pair(served, installed):
    """/translate with format html keeps the markup; /translate_file translates a .txt as
    /translate translates its lines (a document is laid out word by word: white space inside
    a translation becomes single spaces), for every pair and the pivots."""
    client, _ = served
    for pair in DIRECT + PIVOTED:
        source, target = pair.split("-")
        texts = installed["texts"][f"{source}-{'en' if source == 'de' else target}"][:2]
        page = translate(
            client, f"<p>{texts[0]} <b>{texts[1]}</b></p>", source, target, format="html"
        )
        assert page.startswith("<p>") and page.endswith("</p>") and "<b>" in page, pair
        r = client.post(
            "/translate_file",
            data={"source": source, "target": target},
            files={"file": ("notes.txt", "\n".join(texts).encode())},
        )
        assert r.status_code == 200, r.text
        url = r.json()["translatedFileUrl"]
        document = client.get(url[url.index("/download_file/") :])
        assert document.status_code == 200
        lines = translate(client, texts, source, target)  # a document's words: single spaces
        assert document.text.rstrip("\n") == "\n".join(" ".join(t.split()) for t in lines)


def test_detect_and_frontend_settings(served):
    client, _ = served
    r = client.post("/detect", json={"q": "Die Tonqualität ist miserabel."})
    assert r.status_code == 200
    assert r.json()[0]["language"] == "de"  # among the packages' languages
    assert {d["language"] for d in r.json()} <= set(NAMES)
    auto = translate(client, "Die Tonqualität ist miserabel.", "auto", "en")
    assert auto == translate(client, "Die Tonqualität ist miserabel.", "de", "en")
    r = client.get("/frontend/settings")
    assert r.status_code == 200
    settings = r.json()
    assert settings["language"]["target"]["code"] in NAMES
    assert ".txt" in settings["supportedFilesFormat"]


def test_a_glossary_is_placed_by_the_import_of_the_package(served, installed):
    """A request's glossary goes to aiayn's import of the package (constrained beam search):
    the terms are placed (term use as bench/terminology.py measures it), where the package's
    own model, random, uses none of them."""
    from bench.terminology import build, has

    client, _ = served
    sources, _, terms, glossary = build(REPO_ROOT / "data" / "ding-de-en", 300)
    sources, terms = sources[:10], terms[:10]
    used = {de: en for ts in terms for de, en in ts}
    with_terms = translate(client, sources, "de", "en", glossary=used)
    plain = translate(client, sources, "de", "en")
    n = sum(len(ts) for ts in terms)
    use = sum(has(out, en) for out, ts in zip(with_terms, terms, strict=True) for _, en in ts) / n
    plain_use = sum(has(out, en) for out, ts in zip(plain, terms, strict=True) for _, en in ts) / n
    assert use >= 0.98, (use, with_terms)
    assert plain_use < 0.5
    imports = installed["home"] / "aiayn-cache" / "argos" / "imports"
    stamps = [json.loads((p / "aiayn.json").read_text()) for p in imports.glob("[!.]*")]
    assert package_name("de", "en") in {stamp["inputs"]["name"] for stamp in stamps}


def test_a_broken_package_is_skipped_with_a_warning(served, installed):
    client, log = served
    assert f"{BROKEN}: skipped" in log.read_text()
    from aiayn.serve.server import model_specs

    with pytest.warns(UserWarning, match=f"{BROKEN}: skipped"):
        specs = model_specs([], argos_packages=str(installed["packages"]))
    assert sorted(s.name for s in specs) == sorted(package_name(*p) for p in PAIRS.values())


def test_without_model_directories_argos_translates_own_packages_are_served(
    installed, monkeypatch, tmp_path
):
    from aiayn.serve.server import model_specs

    monkeypatch.setenv("ARGOS_PACKAGES_DIR", str(installed["packages"]))
    with pytest.warns(UserWarning, match="skipped"):
        assert len(model_specs([])) == 3
        only = model_specs([], load_only=["de", "en", "es"])  # LibreTranslate's --load-only
    assert sorted(s.name for s in only) == [
        package_name("de", "en"),
        package_name("en", "es"),
    ]
    monkeypatch.setenv("ARGOS_PACKAGES_DIR", str(tmp_path / "none"))
    with pytest.raises(ValueError, match="no model to serve"):
        model_specs([])


def test_an_argosmodel_and_a_ctranslate2_directory_are_served_as_given(
    argos_packages, installed, tmp_path, monkeypatch
):
    """``aiayn serve A.argosmodel CT2_DIR --languages en-fr``: the archive extracted into the
    cache, the CTranslate2 directory (model.bin with its sentencepiece model beside) read in
    place; both answer as Argos Translate."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.server import model_specs

    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path / "cache"))
    package = installed["packages"] / package_name("en", "fr")
    ct2 = tmp_path / "opus-en-fr"
    shutil.copytree(package / "model", ct2)
    shutil.copy(package / "sentencepiece.model", ct2)
    archive = argos_packages["prenorm"]
    specs = model_specs([str(ct2), str(archive)], languages=["en-fr"])
    assert [s.name for s in specs] == ["opus-en-fr", "prenorm"]
    view = installed["view"]["translations"]
    with TestClient(create_app(specs, ServeConfig())) as client:
        wait_ready(client)
        for pair in ("en-fr", "de-en"):
            source, target = pair.split("-")
            assert translate(client, installed["texts"][pair], source, target) == view[pair]
        names = {lang["code"]: lang["name"] for lang in client.get("/languages").json()}
        assert names == {"de": "German", "en": "English", "fr": "French"}
    assert list((tmp_path / "cache" / "argos" / "packages").iterdir())  # the archive's
