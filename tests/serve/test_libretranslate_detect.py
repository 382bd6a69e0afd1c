"""LibreTranslate's ``/detect`` and ``source: "auto"`` over HTTP, on a server of three tiny
random translators (German-English, French-English, English-German, each its own weights):
every text of a batch detected on its own and translated along its own language's route
(directly, or French into German through English), as the same text with its source named
is; a language no route takes into the target refused in LibreTranslate's words; a
document's language found in its text; DeepL's detected_source_language the same way."""

import pytest
import torch

from aiayn.data.tokenizer import Tokenizer
from aiayn.fileio import write_json
from aiayn.modeldir import ModelDir, save_model_dir
from tests.serve.conftest import wait_ready

pytest.importorskip("fastapi")
pytest.importorskip("lingua")

GERMAN = "Ich habe heute leider keine Zeit."
FRENCH = "Je n'ai malheureusement pas le temps aujourd'hui."
ENGLISH = "Unfortunately I have no time today."


@pytest.fixture(scope="module")
def client(model_dirs, tmp_path_factory):
    """de-en (the shared fixture's), fr-en and en-de: the same tokenizer and sizes, other
    random weights each."""
    from aiayn import build_model

    root = tmp_path_factory.mktemp("pairs")
    source = ModelDir.open(model_dirs["translator"])
    tokenizer = Tokenizer.load(source.path)
    dirs = {"de-en": model_dirs["translator"]}
    for seed, (src, tgt) in enumerate((("fr", "en"), ("en", "de")), 1):
        directory = root / f"{src}-{tgt}"
        torch.manual_seed(seed)
        save_model_dir(directory, build_model(source.config).eval())
        tokenizer.save(directory)
        run = {"data": {"task": "translation", "src_lang": src, "tgt_lang": tgt}}
        write_json(directory / "run.json", run)
        dirs[f"{src}-{tgt}"] = directory
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    specs = [ModelSpec(path, name, engine="torch") for name, path in dirs.items()]
    with TestClient(create_app(specs)) as c:  # the torch engine: no conversion to wait for
        wait_ready(c)
        yield c


def translated(client, q, source: str, target: str = "en") -> dict:
    r = client.post("/translate", json={"q": q, "source": source, "target": target})
    assert r.status_code == 200, r.text
    return r.json()


def test_detect_answers_each_served_language(client):
    assert [x["code"] for x in client.get("/languages").json()] == ["de", "en", "fr"]
    for text, language in ((GERMAN, "de"), (FRENCH, "fr"), (ENGLISH, "en"), ("Merci", "fr")):
        (answer,) = client.post("/detect", json={"q": text}).json()
        assert answer["language"] == language, text
        assert 50 < answer["confidence"] <= 100
    # a form body, as LibreTranslate's web page sends it
    assert client.post("/detect", data={"q": FRENCH}).json()[0]["language"] == "fr"
    # nothing to detect: the first language listed, with no confidence
    assert client.post("/detect", json={"q": "42"}).json() == [
        {"language": "de", "confidence": 0.0}
    ]


def test_a_mixed_batch_is_detected_and_translated_text_by_text(client):
    texts = [GERMAN, FRENCH, ENGLISH, "😀", FRENCH]
    body = translated(client, texts, "auto")
    languages = [x["language"] for x in body["detectedLanguage"]]
    assert languages == ["de", "fr", "en", "de", "fr"]
    confidences = [x["confidence"] for x in body["detectedLanguage"]]
    assert all(c > 50 for i, c in enumerate(confidences) if i != 3) and confidences[3] == 0.0
    # each text as its own language's model translates it, with that source named
    german = translated(client, GERMAN, "de")["translatedText"]
    french = translated(client, FRENCH, "fr")["translatedText"]
    assert german != translated(client, GERMAN, "fr")["translatedText"]  # the models differ
    assert body["translatedText"] == [german, french, ENGLISH, "😀", french]
    # one text alone: one detection, not a list
    alone = translated(client, FRENCH, "auto")
    assert alone["translatedText"] == french
    assert alone["detectedLanguage"] == body["detectedLanguage"][1]


def test_a_batch_into_another_target_and_with_alternatives(client):
    r = client.post(
        "/translate",
        json={"q": [ENGLISH, GERMAN], "source": "auto", "target": "de", "alternatives": 1},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    english = client.post(
        "/translate", json={"q": ENGLISH, "source": "en", "target": "de", "alternatives": 1}
    ).json()
    assert body["translatedText"] == [english["translatedText"], GERMAN]
    assert body["alternatives"] == [english["alternatives"], []]
    assert [x["language"] for x in body["detectedLanguage"]] == ["en", "de"]


def test_a_language_detected_reaches_the_target_through_a_pivot(client):
    """No model translates French into German: a French text of a batch goes fr -> en ->
    de (its route), as the same text with its source named does; the German one comes back
    as it came."""
    r = client.post(
        "/translate", json={"q": [FRENCH, GERMAN, ENGLISH], "source": "auto", "target": "de"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [x["language"] for x in body["detectedLanguage"]] == ["fr", "de", "en"]
    french = translated(client, FRENCH, "fr", "de")["translatedText"]
    english = translated(client, ENGLISH, "en", "de")["translatedText"]
    assert body["translatedText"] == [french, GERMAN, english]


def test_a_language_no_route_takes_into_the_target_is_refused_as_libretranslate_does(client):
    # into French nothing translates: a German text found is refused, a French one as it came
    r = client.post("/translate", json={"q": [FRENCH, GERMAN], "source": "auto", "target": "fr"})
    assert r.status_code == 400
    assert r.json() == {
        "error": "French (fr) is not available as a target language from German (de)"
    }
    assert translated(client, [FRENCH], "auto", "fr")["translatedText"] == [FRENCH]
    r = client.post("/translate", json={"q": FRENCH, "source": "auto", "target": "zz"})
    assert r.status_code == 400 and r.json() == {"error": "zz is not supported"}


def test_html_is_detected_by_its_words_not_its_markup(client):
    html = f"<p>{FRENCH} <b>Merci beaucoup.</b></p>"
    r = client.post(
        "/translate", json={"q": html, "source": "auto", "target": "en", "format": "html"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["detectedLanguage"]["language"] == "fr"
    named = client.post(
        "/translate", json={"q": html, "source": "fr", "target": "en", "format": "html"}
    ).json()
    assert body["translatedText"] == named["translatedText"]
    r = client.post(
        "/translate", json={"q": "<p>Hallo <b>Welt</p>", "source": "auto", "target": "en",
                            "format": "html"},
    )  # fmt: skip
    assert r.status_code == 400 and "q" in r.json()["error"]


def test_a_document_is_translated_from_the_language_of_its_text(client):
    pytest.importorskip("docx")
    document = f"{FRENCH}\n\nMerci beaucoup pour votre aide.\n".encode()

    def translate_file(source: str, document: bytes = document, target: str = "en") -> bytes:
        r = client.post(
            "/translate_file",
            data={"source": source, "target": target},
            files={"file": ("lettre.txt", document)},
        )
        assert r.status_code == 200, r.text
        url = r.json()["translatedFileUrl"]
        return client.get(url[url.index("/download_file") :]).content

    assert translate_file("auto") == translate_file("fr")
    assert translate_file("auto") != translate_file("de")
    # through a pivot (fr -> en -> de), and a document found in the target as it came
    assert translate_file("auto", target="de") == translate_file("fr", target="de")
    english = f"{ENGLISH}\n\nThank you very much for your help.\n".encode()
    assert translate_file("auto", english) == english
    # a document with no words: no language found, and two models translate into English
    r = client.post(
        "/translate_file", data={"source": "auto", "target": "en"}, files={"file": ("n.txt", b"42")}
    )
    assert r.status_code == 400
    assert "cannot choose among de, fr" in r.json()["error"]


def test_deepl_detects_each_text_among_the_sources_into_the_target(client):
    """DeepL's /v2/translate without source_lang: each text's language found among those the
    models into the target read (and the target itself), answered as
    detected_source_language and translated by that language's model."""
    body = {"text": [FRENCH, GERMAN, ENGLISH, "42"], "target_lang": "EN-US"}
    r = client.post("/v2/translate", json=body)
    assert r.status_code == 200, r.text
    got = r.json()["translations"]
    assert [t["detected_source_language"] for t in got] == ["FR", "DE", "EN", "DE"]
    french = translated(client, FRENCH, "fr")["translatedText"]
    german = translated(client, GERMAN, "de")["translatedText"]
    assert [t["text"] for t in got] == [french, german, ENGLISH, "42"]
    # tagged: its words, not its tags
    tagged = {"text": f"<p>{FRENCH}</p>", "target_lang": "EN-US", "tag_handling": "html"}
    r = client.post("/v2/translate", json=tagged)
    assert r.json()["translations"][0]["detected_source_language"] == "FR"


def test_deepl_reads_a_documents_language_from_its_text(client):
    def result(fields: dict) -> bytes:
        r = client.post(
            "/v2/document",
            data={"target_lang": "EN-GB", **fields},
            files={"file": ("lettre.txt", f"{FRENCH}\n".encode(), "text/plain")},
        )
        assert r.status_code == 200, r.text
        handle = r.json()
        key = {"document_key": handle["document_key"]}
        path = f"/v2/document/{handle['document_id']}"
        assert client.post(path, json=key).json()["status"] == "done"
        return client.post(path + "/result", json=key).content

    assert result({}) == result({"source_lang": "FR"}) != result({"source_lang": "DE"})


def test_a_suggestion_under_auto_is_stored_as_the_language_of_its_text(client, tmp_path):
    import sqlite3

    from aiayn.serve.suggestions import SuggestionStore

    store = SuggestionStore(tmp_path / "s.db")
    client.app.state.suggestions = store
    try:
        for q in (FRENCH, GERMAN):
            r = client.post("/suggest", json={"q": q, "s": "x", "source": "auto", "target": "en"})
            assert r.status_code == 200, r.text
        # no language found, and two sources translate into English
        r = client.post("/suggest", json={"q": "42", "s": "x", "source": "auto", "target": "en"})
        assert r.status_code == 400 and "cannot choose among de, fr" in r.json()["error"]
    finally:
        client.app.state.suggestions = None
        store.close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        rows = db.execute("SELECT source FROM suggestions ORDER BY rowid").fetchall()
    assert rows == [("fr",), ("de",)]
