"""DeepL's routes over HTTP as its clients' requests reach them (FastAPI's TestClient, a tiny
random translator): the key in each place DeepL takes it, DeepL's status codes and error body,
JSON and form bodies, how texts are cut, what the options it has not are answered."""

import pytest

from tests.serve.conftest import make_client, wait_ready

pytest.importorskip("fastapi")
pytest.importorskip("limits")


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """(key database, {"plain": key, "slow": 2 requests a minute, "quota": 12 characters a
    month})."""
    from aiayn.serve.keys import KeyStore

    db = tmp_path_factory.mktemp("deepl-keys") / "keys.db"
    store = KeyStore(db)
    made = {
        "plain": store.add()[0],
        "slow": store.add(req_limit=2)[0],
        "quota": store.add(char_quota=12)[0],
        "other": store.add()[0],
    }
    store.close()
    return db, made


@pytest.fixture(scope="module")
def deepl(model_dirs, keys):
    """A test client of the translator behind --api-keys, and the served model."""
    from aiayn.serve.access import AccessConfig

    access = AccessConfig(api_keys=True, api_keys_db=str(keys[0]))
    with make_client({"t": model_dirs["translator"]}, access=access, max_texts=4) as c:
        wait_ready(c)
        yield c, c.app.state.registry.models["de-en"]


def auth(key: str) -> dict:
    return {"Authorization": f"DeepL-Auth-Key {key}"}


def translated(model, texts: list[str]) -> list[str]:
    return [t.text for t in model.api.translate(texts, scores=False)]


def test_the_key_in_the_header_the_form_or_the_query_string(deepl, keys):
    c, _ = deepl
    key = keys[1]["plain"]
    body = {"text": "Ja.", "target_lang": "EN-US"}
    assert c.post("/v2/translate", json=body, headers=auth(key)).status_code == 200
    assert c.post("/v2/translate", data={**body, "auth_key": key}).status_code == 200
    assert c.post(f"/v2/translate?auth_key={key}", data=body).status_code == 200
    assert c.get(f"/v2/usage?auth_key={key}").status_code == 200


@pytest.mark.parametrize(
    "headers, fields",
    [
        ({}, {}),
        ({"Authorization": "DeepL-Auth-Key not-one-of-the-keys"}, {}),
        ({}, {"auth_key": "not-one-of-the-keys"}),
        ({"Authorization": "Basic c29tZW9uZQ=="}, {}),
    ],
)
def test_a_missing_or_wrong_key_is_403_in_deepls_body(deepl, headers, fields):
    c, _ = deepl
    before = c.app.state.registry.metrics.registry.get_sample_value(
        "aiayn_batch_texts_count", {"model": "de-en"}
    )
    r = c.post(
        "/v2/translate", data={"text": "Ja.", "target_lang": "EN-US", **fields}, headers=headers
    )
    assert r.status_code == 403 and set(r.json()) == {"message"}
    assert ("Invalid API key" if fields or "DeepL" in str(headers) else "requires an API key") in (
        r.json()["message"]
    )
    assert c.get("/v2/languages", headers=headers, params=fields).status_code == 403
    after = c.app.state.registry.metrics.registry.get_sample_value(
        "aiayn_batch_texts_count", {"model": "de-en"}
    )
    assert after == before  # no model ran


def test_json_and_form_bodies_translate_each_text_in_order(deepl, keys):
    c, model = deepl
    texts = ["Ja.", "Das ist gut.", "Nein."]
    want = translated(model, texts)
    headers = auth(keys[1]["plain"])
    as_json = c.post("/v2/translate", json={"text": texts, "target_lang": "en-us"}, headers=headers)
    as_form = c.post("/v2/translate", data={"text": texts, "target_lang": "EN-GB"}, headers=headers)
    for r in (as_json, as_form):
        assert r.status_code == 200, r.text
        assert [t["text"] for t in r.json()["translations"]] == want
        assert [t["billed_characters"] for t in r.json()["translations"]] == list(map(len, texts))
        assert {t["detected_source_language"] for t in r.json()["translations"]} == {"DE"}
    r = c.post(
        "/v2/translate",
        json={"text": ["Ja."], "target_lang": "EN-US", "source_lang": "de", "some_new_field": 1},
        headers=headers,
    )
    assert r.status_code == 200  # a field this server does not know is accepted
    r = c.post("/v2/translate", json={"text": ["Ja."], "target_lang": "EN"}, headers=headers)
    assert r.status_code == 200  # "EN", refused by DeepL's clients, is English all the same


def test_split_sentences(deepl, keys):
    c, model = deepl
    headers = auth(keys[1]["plain"])

    def one(text: str, split: str | None) -> str:
        body = {"text": [text], "target_lang": "EN-US"}
        if split is not None:
            body["split_sentences"] = split
        r = c.post("/v2/translate", json=body, headers=headers)
        assert r.status_code == 200, r.text
        return r.json()["translations"][0]["text"]

    first, second = translated(model, ["Das ist gut.", "Wir gehen heim."])
    assert one("Das ist gut. Wir gehen heim.", None) == f"{first} {second}"
    assert one("Das ist gut.\nWir gehen heim.", "1") == f"{first}\n{second}"
    assert one("Das ist gut.\nWir gehen heim.", "nonewlines") == f"{first} {second}"
    (whole,) = translated(model, ["Das ist gut. Wir gehen heim."])
    assert one("Das ist gut.\nWir gehen heim.", "0") == whole


def test_tags_in_xml_and_html(deepl, keys):
    c, _ = deepl
    headers = auth(keys[1]["plain"])
    body = {
        "text": ['Das <b>ist</b> <x id="7"></x> gut.', "<p>Ja.</p><p>Nein.</p>"],
        "target_lang": "EN-US",
        "tag_handling": "xml",
        "ignore_tags": "x",
    }
    r = c.post("/v2/translate", json=body, headers=headers)
    assert r.status_code == 200, r.text
    xml, paragraphs = (t["text"] for t in r.json()["translations"])
    assert xml.count("<b>") == xml.count("</b>") == 1 and '<x id="7"></x>' in xml
    assert paragraphs.startswith("<p>") and paragraphs.count("</p><p>") == 1
    r = c.post("/v2/translate", json={**body, "text": ["<b>Ja"]}, headers=headers)
    assert (
        r.status_code == 400 and "text[0]: at its end: not well-formed XML" in r.json()["message"]
    )
    r = c.post(
        "/v2/translate",
        data={"text": "<p>Ja <code>x</code></p>", "target_lang": "EN-US", "tag_handling": "html"},
        headers=headers,
    )
    assert r.status_code == 200 and "<code>x</code>" in r.json()["translations"][0]["text"]


def test_options_this_server_has_not_are_answered_as_deepl_answers_them(deepl, keys):
    c, _ = deepl
    headers = auth(keys[1]["plain"])
    body = {"text": ["Ja."], "target_lang": "EN-US"}
    for formality in ("default", "prefer_more", "prefer_less"):
        r = c.post("/v2/translate", json={**body, "formality": formality}, headers=headers)
        assert r.status_code == 200
    r = c.post("/v2/translate", json={**body, "formality": "more"}, headers=headers)
    assert r.status_code == 400 and "not supported for target_lang EN-US" in r.json()["message"]
    r = c.post(
        "/v2/translate", json={**body, "model_type": "prefer_quality_optimized"}, headers=headers
    )
    assert r.json()["translations"][0]["model_type_used"] == "latency_optimized"
    assert (
        "model_type_used"
        not in c.post("/v2/translate", json=body, headers=headers).json()["translations"][0]
    )
    r = c.post("/v2/translate", json={**body, "model_type": "quality_optimized"}, headers=headers)
    assert r.status_code == 400 and "quality_optimized" in r.json()["message"]
    r = c.post("/v2/translate", json={**body, "context": "Ein Satz davor."}, headers=headers)
    assert r.status_code == 200  # accepted, not used (and not billed)
    assert r.json()["translations"][0]["billed_characters"] == 3
    r = c.post("/v2/translate", json={**body, "style_id": "x"}, headers=headers)
    assert r.status_code == 404
    r = c.post("/v2/translate", json={**body, "target_lang": "FR"}, headers=headers)
    assert r.status_code == 400 and "served: EN-GB, EN-US" in r.json()["message"]
    r = c.post("/v2/translate", json={**body, "source_lang": "FR"}, headers=headers)
    assert r.status_code == 400 and "give one of DE, EN" in r.json()["message"]
    r = c.post("/v2/translate", json={**body, "source_lang": "EN"}, headers=headers)
    assert r.json()["translations"][0] == {
        "detected_source_language": "EN", "text": "Ja.", "billed_characters": 3,
    }  # fmt: skip  # already in the target language: as it came
    r = c.post("/v2/translate", json={"target_lang": "EN-US"}, headers=headers)
    assert r.status_code == 400 and r.json() == {"message": "Parameter 'text' not specified."}


def test_sizes_are_413_and_414(deepl, keys):
    c, _ = deepl
    headers = auth(keys[1]["plain"])
    r = c.post("/v2/translate", json={"text": ["Ja."] * 5, "target_lang": "EN-US"}, headers=headers)
    assert r.status_code == 413 and "at most 4 a request (--max-texts)" in r.json()["message"]
    r = c.post(
        "/v2/translate", json={"text": ["a" * 2001], "target_lang": "EN-US"}, headers=headers
    )
    assert r.status_code == 413 and "text[0]: 2001 characters" in r.json()["message"]
    r = c.post("/v2/translate", content=b"x" * 1_000_001, headers=headers)
    assert r.status_code == 413 and set(r.json()) == {"message"}
    r = c.get("/v2/languages?type=source&pad=" + "x" * 9000, headers=headers)
    assert r.status_code == 414 and "URI too long" in r.json()["message"]


def test_a_keys_request_limit_is_429_and_its_quota_456(deepl, keys):
    c, _ = deepl
    slow, quota = auth(keys[1]["slow"]), auth(keys[1]["quota"])
    body = {"text": ["Ja."], "target_lang": "EN-US"}
    codes = [c.post("/v2/translate", json=body, headers=slow).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    r = c.post("/v2/translate", json={**body, "text": ["Das ist gut."]}, headers=quota)
    assert r.status_code == 200  # 12 characters: the quota
    r = c.post("/v2/translate", json=body, headers=quota)
    assert r.status_code == 456 and "Quota exceeded" in r.json()["message"]
    usage = c.get("/v2/usage", headers=quota).json()
    assert (usage["character_count"], usage["character_limit"]) == (12, 12)
    assert usage["start_time"].endswith("-01T00:00:00Z")


def test_a_failed_translation_is_not_billed(deepl, keys, tmp_path):
    c, _ = deepl
    headers = auth(keys[1]["other"])
    before = c.get("/v2/usage", headers=headers).json()["character_count"]
    r = c.post(
        "/v2/translate",
        json={"text": ["<b>Ja"], "target_lang": "EN-US", "tag_handling": "xml"},
        headers=headers,
    )
    assert r.status_code == 400
    assert c.get("/v2/usage", headers=headers).json()["character_count"] == before


def test_languages_by_get_with_a_form_by_query_and_by_post(deepl, keys):
    c, _ = deepl
    headers = auth(keys[1]["plain"])
    source = [{"language": "DE", "name": "German"}]
    assert c.get("/v2/languages", headers=headers).json() == source
    targets = [
        code["language"] for code in c.get("/v2/languages?type=target", headers=headers).json()
    ]
    assert targets == ["EN-GB", "EN-US"]
    r = c.request(
        "GET",
        "/v2/languages",
        content=b"type=target",
        headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert [code["language"] for code in r.json()] == targets  # the Python client's GET
    assert [
        x["language"]
        for x in c.post("/v2/languages", data={"type": "target"}, headers=headers).json()
    ] == targets
    r = c.get("/v2/languages?type=both", headers=headers)
    assert r.status_code == 400 and set(r.json()) == {"message"}


def test_glossaries_belong_to_their_key(deepl, keys):
    c, model = deepl
    mine, theirs = auth(keys[1]["plain"]), auth(keys[1]["other"])
    body = {
        "name": "g",
        "source_lang": "DE",
        "target_lang": "EN",
        "entries": "Haus\thouse\n\nBaum\ttree\n",
    }
    r = c.post("/v2/glossaries", data=body, headers=mine)
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["entry_count"], made["source_lang"], made["target_lang"]) == (2, "de", "en")
    glossary = made["glossary_id"]
    assert c.get(f"/v2/glossaries/{glossary}", headers=theirs).status_code == 404
    assert glossary not in str(c.get("/v2/glossaries", headers=theirs).json())
    assert c.delete(f"/v2/glossaries/{glossary}", headers=theirs).status_code == 404
    r = c.post(
        "/v2/translate",
        json={"text": "Haus", "target_lang": "EN-US", "source_lang": "DE", "glossary_id": glossary},
        headers=theirs,
    )
    assert r.status_code == 404
    r = c.get(f"/v2/glossaries/{glossary}/entries", headers={**mine, "Accept": "application/json"})
    assert r.status_code == 415
    r = c.get(
        f"/v2/glossaries/{glossary}/entries",
        headers={**mine, "Accept": "text/tab-separated-values"},
    )
    assert r.text == "Haus\thouse\nBaum\ttree" and r.headers["content-type"].startswith(
        "text/tab-separated-values"
    )
    r = c.post(
        "/v2/translate",
        json={"text": "Haus", "target_lang": "EN-US", "glossary_id": glossary},
        headers=mine,
    )
    assert r.status_code == 400 and "requires the source_lang" in r.json()["message"]
    r = c.post(
        "/v2/translate",
        json={"text": "Haus", "target_lang": "EN-US", "source_lang": "DE", "glossary_id": glossary},
        headers=mine,
    )
    assert "house" in r.json()["translations"][0]["text"]
    assert c.delete(f"/v2/glossaries/{glossary}", headers=mine).status_code == 204
    assert c.get(f"/v2/glossaries/{glossary}", headers=mine).status_code == 404


@pytest.mark.parametrize(
    "entries, entries_format, message",
    [
        ("Haus", "tsv", "line 1: no tab between two terms"),
        ("Haus\thouse\nHaus\thome", "tsv", "line 2: the source term 'Haus' is on line 1"),
        ("Haus\thouse\nhaus\thome", "tsv", "case is ignored"),
        ("a\tb\tc", "tsv", "more than one tab"),
        ('Haus,"house, home"\nBaum,tree,de,en', "csv", None),
        ("Haus", "csv", "row 1: 1 fields"),
        ("", "tsv", "no entries"),
    ],
)
def test_glossary_entries_are_checked(deepl, keys, entries, entries_format, message):
    c, _ = deepl
    body = {"name": "g", "source_lang": "de", "target_lang": "en", "entries": entries,
            "entries_format": entries_format}  # fmt: skip
    r = c.post("/v2/glossaries", json=body, headers=auth(keys[1]["plain"]))
    if message is None:
        assert r.status_code == 201 and r.json()["entry_count"] == 2
        c.delete(f"/v2/glossaries/{r.json()['glossary_id']}", headers=auth(keys[1]["plain"]))
    else:
        assert r.status_code == 400 and message in r.json()["message"], r.text


def test_a_glossary_for_a_pair_not_served_is_refused(deepl, keys):
    c, _ = deepl
    body = {"name": "g", "source_lang": "en", "target_lang": "fr", "entries": "a\tb"}
    r = c.post("/v2/glossaries", json=body, headers=auth(keys[1]["plain"]))
    assert r.status_code == 400 and "glossaries are made for: de-en" in r.json()["message"]


def test_a_document_is_its_keys_and_its_result_comes_once(deepl, keys):
    c, model = deepl
    mine, theirs = auth(keys[1]["plain"]), auth(keys[1]["other"])
    r = c.post(
        "/v2/document",
        data={"target_lang": "EN-US"},
        files={"file": ("notiz.txt", b"Das ist gut.\n", "text/plain")},
        headers=mine,
    )
    assert r.status_code == 200, r.text
    handle = r.json()
    assert len(handle["document_id"]) == 32 and len(handle["document_key"]) == 64
    path = f"/v2/document/{handle['document_id']}"
    key = {"document_key": handle["document_key"]}
    assert c.post(path, json=key, headers=theirs).status_code == 404
    assert c.post(path, json={"document_key": "0" * 64}, headers=mine).status_code == 404
    status = c.post(path, json=key, headers=mine).json()
    assert status == {
        "document_id": handle["document_id"],
        "status": "done",
        "billed_characters": 12,
    }
    r = c.post(path + "/result", data=key, headers=mine)
    assert r.status_code == 200 and r.text == translated(model, ["Das ist gut."])[0] + "\n"
    assert "notiz_en.txt" in r.headers["content-disposition"]
    assert c.post(path + "/result", json=key, headers=mine).status_code == 404  # once
    r = c.post(
        "/v2/document",
        data={"target_lang": "EN-US"},
        files={"file": ("x.pdf", b"%PDF-1.4", "application/pdf")},
        headers=mine,
    )
    assert r.status_code == 400 and "format not supported" in r.json()["message"]


def test_a_key_database_made_before_quotas_takes_them(tmp_path, capsys):
    """A database of keys made before keys had character quotas gains the column on opening;
    ``aiayn keys add --char-quota`` stores one and ``list`` shows it."""
    import sqlite3

    from aiayn.cli import main
    from aiayn.serve.keys import KeyStore, digest

    db = tmp_path / "old.db"
    with sqlite3.connect(db) as old:
        old.execute(
            "CREATE TABLE api_keys (digest TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', "
            "req_limit INTEGER, char_limit INTEGER, created REAL NOT NULL)"
        )
        old.execute("INSERT INTO api_keys VALUES (?, 'old', NULL, NULL, 0)", (digest("k" * 20),))
    old.close()
    store = KeyStore(db, create=False)
    assert store.lookup("k" * 20).char_quota is None
    store.close()
    assert main(["keys", "--db", str(db), "add", "--char-quota", "500", "--name", "new"]) == 0
    capsys.readouterr()
    assert main(["keys", "--db", str(db), "list"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split("\t")[:4] == ["id", "req_limit", "char_limit", "char_quota"]
    assert [line.split("\t")[3] for line in listing[1:]] == ["-", "500"]


def test_the_openapi_document_says_deepls_scheme_codes_and_statuses(deepl):
    c, _ = deepl
    document = c.get("/openapi.json").json()
    scheme = document["components"]["securitySchemes"]["DeepL-Auth-Key"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "Authorization")
    operation = document["paths"]["/v2/translate"]["post"]
    assert operation["security"] == [{"DeepL-Auth-Key": []}]
    assert {"400", "403", "413", "414", "429", "456"} <= set(operation["responses"])
    assert "422" not in operation["responses"]
    error = operation["responses"]["456"]["content"]["application/json"]["schema"]
    assert error == {"$ref": "#/components/schemas/DeepLError"}
    body = operation["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert body["target_lang"]["enum"] == ["EN-GB", "EN-US"]
    (options,) = [o["enum"] for o in body["formality"]["anyOf"] if "enum" in o]
    assert options == ["default", "prefer_more", "prefer_less"] and "style_id" not in body


def test_the_requests_weblate_and_subtitle_edit_send(deepl, keys):
    """Weblate's DeepL code: languages by query, a glossary from TSV, JSON texts with its
    placeholders as ignored XML tags into "EN"; Subtitle Edit's: a form with formality."""
    c, _ = deepl
    headers = auth(keys[1]["plain"])
    sources = c.get("/v2/languages", params={"type": "source"}, headers=headers).json()
    assert [x["language"] for x in sources] == ["DE"]
    made = c.post(
        "/v2/glossaries",
        json={"name": "weblate:1:DE:EN", "source_lang": "DE", "target_lang": "EN",
              "entries": "Haus\thouse", "entries_format": "tsv"},
        headers=headers,
    )  # fmt: skip
    assert made.status_code == 201
    listed = c.get("/v2/glossaries", headers=headers).json()["glossaries"]
    assert {"weblate:1:DE:EN": made.json()["glossary_id"]}.items() <= {
        g["name"]: g["glossary_id"] for g in listed
    }.items()
    texts = ['Das Haus <x id="0"></x> ist gut.', '<x id="3"></x> Haus']
    r = c.post(
        "/v2/translate",
        json={"text": texts, "source_lang": "DE", "target_lang": "EN", "formality": "default",
              "tag_handling": "xml", "ignore_tags": ["x"],
              "glossary_id": made.json()["glossary_id"]},
        headers=headers,
    )  # fmt: skip
    assert r.status_code == 200, r.text
    first, second = (t["text"] for t in r.json()["translations"])
    assert '<x id="0"></x>' in first and '<x id="3"></x>' in second
    assert "house" in first and "house" in second  # the glossary's term
    assert (
        c.delete(f"/v2/glossaries/{made.json()['glossary_id']}", headers=headers).status_code == 204
    )
    form = {"text": "Das ist gut.\nJa.", "target_lang": "en-gb", "source_lang": "de",
            "formality": "default"}  # fmt: skip
    r = c.post("/v2/translate", data=form, headers=headers)
    assert r.status_code == 200 and r.json()["translations"][0]["text"].count("\n") == 1


def test_a_method_not_allowed_names_every_method_of_its_path(deepl, keys):
    c, _ = deepl
    headers = auth(keys[1]["plain"])
    r = c.put("/v2/glossaries", headers=headers)
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST"
    assert c.put("/v2/translate", headers=headers).headers["allow"] == "POST"


def test_glossaries_live_beside_the_keys_readable_by_their_owner_only(deepl, keys):
    import stat

    from aiayn.serve.glossaries import store_path

    path = store_path(keys[0])
    assert path == keys[0].with_name("keys-glossaries.db") and path.is_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
