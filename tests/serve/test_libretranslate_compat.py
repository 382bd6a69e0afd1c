"""Where LibreTranslate's clients would notice a difference: each case as LibreTranslate 1.9.6
answers it over HTTP (serving the same German-English model), the answer asserted here."""

from tests.serve.conftest import make_client, wait_ready

PAIR = {"source": "de", "target": "en"}
A, B, C = "Das ist ein gutes Buch.", "Ich habe heute keine Zeit.", "Wo ist der Bahnhof?"


def translated(client, q, **fields):
    r = client.post("/translate", json={"q": q, **PAIR, **fields})
    assert r.status_code == 200, r.text
    return r.json()["translatedText"]


def spaced(*texts: str) -> str:
    """Texts joined as a line's sentences are: by single spaces."""
    return " ".join(" ".join(texts).split())


def test_a_text_is_translated_line_by_line_and_sentence_by_sentence(client):
    # LibreTranslate: "Das ist ein gutes Buch.\nIch habe heute keine Zeit." -> "That’s a good
    # book.\nI have no time today." (a model of sentences given the whole text garbled it)
    a, b, c = (translated(client, t) for t in (A, B, C))
    assert all(t.strip() for t in (a, b, c))
    assert translated(client, f"{A} {B}") == spaced(a, b)
    assert translated(client, f"{A}\n{B}") == f"{a}\n{b}"
    # blank lines and each line's leading and trailing white space are kept
    assert translated(client, f"  {A} {B}\n\n\t{C}  \n") == f"  {spaced(a, b)}\n\n\t{c}  \n"
    assert translated(client, [f"{A}\n{B}", C]) == [f"{a}\n{b}", c]
    # a line with nothing to translate comes back as it came, the others translated
    assert translated(client, f"{A}\n😀\n{C}") == f"{a}\n😀\n{c}"


def test_a_paragraph_longer_than_the_model_reads_is_translated_by_its_sentences(model_dirs):
    # LibreTranslate translates a paragraph of ten sentences (within --char-limit) whole;
    # the tiny model here reads 64 tokens at most: the paragraph is several times that
    with make_client(model_dirs) as client:
        wait_ready(client)
        paragraph = " ".join([A, B, C] * 6)
        r = client.post("/translate", json={"q": paragraph, **PAIR})
        assert r.status_code == 200, r.text
        a, b, c = (translated(client, t) for t in (A, B, C))
        assert r.json()["translatedText"] == spaced(*[a, b, c] * 6)


def test_alternatives_of_a_paragraph_join_its_sentences_alternatives(client):
    # LibreTranslate: "Das ist ein gutes Buch. Ich habe heute keine Zeit.", alternatives 2 ->
    # {"translatedText": "That’s a good book. I have no time today.", "alternatives":
    # ["That's a good book. I don’t have time today.", "This is a good book. I haven’t time
    # today."]}: alternative k of each sentence, joined
    r = client.post("/translate", json={"q": f"{A} {B}", "alternatives": 2, **PAIR})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["translatedText"] not in body["alternatives"]
    assert len(set(body["alternatives"])) == len(body["alternatives"]) <= 2
    ones = [
        client.post("/v1/translate", json={"text": t, "beam": 3, "nbest": 3}).json() for t in (A, B)
    ]
    firsts, seconds = ([h["text"] for h in o["translations"][0]["nbest"]] for o in ones)
    assert body["translatedText"] == spaced(firsts[0], seconds[0])  # beam 3's best
    expected = [spaced(x, y) for x, y in zip(firsts[1:], seconds[1:], strict=True)]
    expected = [
        e for i, e in enumerate(expected) if e != body["translatedText"] and e not in expected[:i]
    ]
    assert body["alternatives"] == expected


def test_a_form_from_a_text_area_has_its_lines_ended_as_lf(client):
    # LibreTranslate reads a form's q with its line breaks as "\n" (a browser sends a text
    # area's lines ended "\r\n"): "Das ist ein gutes Buch.\r\nIch habe heute keine Zeit." ->
    # "That’s a good book.\nI have no time today."
    r = client.post("/translate", data={"q": f"{A}\r\n{B}", **PAIR})
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == f"{translated(client, A)}\n{translated(client, B)}"


def test_html_with_alternatives_is_translated_with_none(client):
    # LibreTranslate: {"q": "<p>Hallo Welt.</p>", "format": "html", "alternatives": 2} -> 200
    # {"alternatives": [], "translatedText": "<p>half world.</p>"}; a list of two pages ->
    # "alternatives": [[], []]
    r = client.post(
        "/translate", json={"q": "<p>Hallo Welt.</p>", "format": "html", "alternatives": 2, **PAIR}
    )
    assert r.status_code == 200, r.text
    page = translated(client, "<p>Hallo Welt.</p>", format="html")
    assert r.json() == {"translatedText": page, "alternatives": []}
    r = client.post(
        "/translate",
        json={"q": ["<p>Hallo</p>", "<b>Gut</b>"], "format": "html", "alternatives": 2, **PAIR},
    )
    assert r.status_code == 200, r.text
    assert r.json()["alternatives"] == [[], []]


def test_fields_read_as_libretranslate_reads_them(client):
    # LibreTranslate: "source": "DE" -> 200 (a code in any case); "format": null -> 200, text
    hallo = translated(client, "Hallo Welt.")
    assert translated(client, "Hallo Welt.", source="DE", target="EN") == hallo
    assert translated(client, "Hallo Welt.", format=None) == hallo
    # "source": "", null or left out -> 400 {"error": "Invalid request: missing source
    # parameter"} (it answered " is not supported", and took a source left out as "auto"),
    # in a JSON body, a form, or the query string
    for empty in ("", None):
        r = client.post("/translate", json={"q": "Hallo", "source": empty, "target": "en"})
        assert r.status_code == 400
        assert r.json() == {"error": "Invalid request: missing source parameter"}
    for r in (
        client.post("/translate", json={"q": "Hallo", "target": "en"}),
        client.post("/translate", data={"q": "Hallo", "target": "en"}),
        client.post("/translate?q=Hallo&target=en"),
    ):
        assert r.status_code == 400
        assert r.json() == {"error": "Invalid request: missing source parameter"}
        r = client.post("/translate", json={"q": "Hallo", "source": "de", "target": empty})
        assert r.json() == {"error": "Invalid request: missing target parameter"}
    # a form's alternatives=abc -> 400 {"error": "Invalid request: alternatives parameter is
    # not a number"} (it answered pydantic's "Input should be a valid integer, ...")
    r = client.post("/translate", data={"q": "Hallo", "alternatives": "abc", **PAIR})
    assert r.status_code == 400
    assert r.json() == {"error": "Invalid request: alternatives parameter is not a number"}
    # /detect {"q": ""} -> 400 {"error": "Invalid request: missing q parameter"}
    # (and a list holding an empty text, which a form cannot tell from it; LibreTranslate
    # detects [""])
    for empty in ("", ["Hallo", ""]):
        r = client.post("/detect", json={"q": empty})
        assert r.status_code == 400
        assert r.json() == {"error": "Invalid request: missing q parameter"}


def test_fields_in_the_query_string_of_a_form_or_a_request_without_a_body(client):
    # LibreTranslate reads them there unless the body is JSON (Flask's request.values):
    # POST /translate?q=Hallo&source=de&target=en -> 200 {"translatedText": "Hallo"}
    hallo = translated(client, "Hallo Welt.")
    r = client.post("/translate?q=Hallo%20Welt.&source=de&target=en")
    assert r.status_code == 200, r.text
    assert r.json() == {"translatedText": hallo}
    r = client.post("/translate?source=de&target=en", data={"q": "Hallo Welt."})
    assert r.json() == {"translatedText": hallo}
    r = client.post("/translate?q=Welt", data={"q": "Hallo Welt.", **PAIR})  # the form's wins
    assert r.json() == {"translatedText": hallo}
    # a JSON body is read alone: {"error": "Invalid request: missing q parameter"}
    r = client.post("/translate?q=Hallo", json=PAIR)
    assert r.status_code == 400
    assert r.json() == {"error": "Invalid request: missing q parameter"}


def test_an_api_key_in_the_query_string_of_a_form(model_dirs, tmp_path):
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.keys import KeyStore

    db = tmp_path / "keys.db"
    store = KeyStore(db)
    key, _ = store.add(key="q" * 20)
    store.close()
    with make_client(model_dirs, access=AccessConfig(api_keys=True, api_keys_db=str(db))) as c:
        wait_ready(c)
        r = c.post(f"/translate?api_key={key}", data={"q": "Hallo Welt.", **PAIR})
        assert r.status_code == 200, r.text
        r = c.post("/translate?api_key=" + "x" * 20, data={"q": "Hallo Welt.", **PAIR})
        assert r.status_code == 403 and r.json() == {"error": "Invalid API key"}


def test_a_text_asked_for_in_its_own_language_comes_back_as_it_came(client):
    # LibreTranslate: {"q": "Hallo Welt.", "source": "de", "target": "de"} -> 200
    # {"translatedText": "Hallo Welt."} (this server answered 400 "German (de) is not available
    # as a target language from German (de)"); "source": "auto", "target": "de" -> 200
    # {"detectedLanguage": {"confidence": 90.0, "language": "de"}, "translatedText": "Hallo
    # Welt."}; /languages lists every language among its own targets
    for target in ("de", "en"):
        r = client.post("/translate", json={"q": "Hallo Welt.", "source": target, "target": target})
        assert r.status_code == 200, r.text
        assert r.json() == {"translatedText": "Hallo Welt."}
    r = client.post(
        "/translate",
        json={"q": ["Hallo Welt.", "42"], "source": "auto", "target": "de", "alternatives": 1},
    )
    assert r.status_code == 200, r.text
    assert r.json() == {
        "translatedText": ["Hallo Welt.", "42"],
        "alternatives": [[], []],
        "detectedLanguage": [
            {"language": "de", "confidence": 90.0},  # as LibreTranslate's (lexilang's)
            {"language": "de", "confidence": 0.0},
        ],
    }
    languages = {x["code"]: x["targets"] for x in client.get("/languages").json()}
    assert languages == {"de": ["de", "en"], "en": ["en"]}
    # a pair not served is refused as before
    r = client.post("/translate", json={"q": "Hello", "source": "en", "target": "de"})
    assert r.status_code == 400
    assert r.json() == {
        "error": "German (de) is not available as a target language from English (en)"
    }


def test_a_translated_file_downloads_named_with_its_target_language(client):
    # LibreTranslate: brief.docx into English downloads as "attachment; filename=brief_en.docx"
    # (this server answered "brief.docx", the original's own name; and "Grüße.txt" as
    # "Gr__e.txt", where LibreTranslate's is "Grue_en.txt")
    from urllib.parse import quote

    for name, header in (
        ("brief.txt", 'attachment; filename="brief_en.txt"'),
        ("Grüße.txt", f"attachment; filename*=utf-8''{quote('Grüße_en.txt')}"),
    ):
        r = client.post("/translate_file", files={"file": (name, b"Hallo Welt.\n")}, data=PAIR)
        assert r.status_code == 200, r.text
        got = client.get(r.json()["translatedFileUrl"])
        assert got.status_code == 200
        assert got.headers["content-disposition"] == header
        assert got.text == translated(client, "Hallo Welt.") + "\n"


def test_an_api_key_that_is_no_string_is_a_wrong_key(model_dirs, tmp_path):
    # LibreTranslate: {"api_key": 12345, ...} -> 403 {"error": "Invalid API key"} (this
    # server answered it as a missing key: 400 "Please contact the server operator ...")
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.keys import KeyStore

    db = tmp_path / "keys.db"
    KeyStore(db).close()
    with make_client(model_dirs, access=AccessConfig(api_keys=True, api_keys_db=str(db))) as c:
        wait_ready(c)
        for key in (12345, True, ["k" * 20]):
            r = c.post("/translate", json={"q": "Hallo", "api_key": key, **PAIR})
            assert r.status_code == 403 and r.json() == {"error": "Invalid API key"}
        r = c.post("/translate", json={"q": "Hallo", "api_key": "", **PAIR})
        assert r.status_code == 400  # an empty one is none
        assert r.json() == {"error": "Please contact the server operator to get an API key"}


def test_a_word_longer_than_the_model_reads_is_refused_naming_it(client):
    # LibreTranslate translates it; a sentence is cut between words, so a word the model
    # cannot read whole (the tiny model here: 63 tokens) is a 400 naming it, as documented
    r = client.post("/translate", json={"q": f"{A} {'x' * 300} {B}", **PAIR})
    assert r.status_code == 400, r.text
    assert "'xxxx" in r.json()["error"] and "no space to cut it at" in r.json()["error"]
