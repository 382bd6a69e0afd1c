"""DeepL's own Python client (``deepl``, a dev dependency) against ``aiayn serve`` on
127.0.0.1 serving models/ding-de-en behind API keys, as its users call it: text (one, a list,
with tags, with a glossary), languages, usage, glossaries (v2 and the v3 routes of its
``DeepLClient``), documents, and the exceptions it raises for a wrong key, a spent quota
(also counted by two server processes sharing one key database) and a glossary not found."""

import os
import re
import subprocess
import sys
import uuid
from contextlib import closing

import pytest

from tests.conftest import REPO_ROOT
from tests.serve.conftest import live_server, wait_process_ready

pytest.importorskip("fastapi")
deepl = pytest.importorskip("deepl")

MODEL = REPO_ROOT / "models" / "ding-de-en"
TEXT, OTHER = "Das Haus ist klein.", "Wo ist der Bahnhof?"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(server URL, key database, a valid key, the served model's translate) of
    models/ding-de-en behind --api-keys on 127.0.0.1; the client retries nothing."""
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.app import create_app
    from aiayn.serve.keys import KeyStore
    from aiayn.serve.models import ModelSpec

    db = tmp_path_factory.mktemp("deepl-keys") / "keys.db"
    store = KeyStore(db)
    key = store.add()[0]
    store.close()
    access = AccessConfig(api_keys=True, api_keys_db=str(db))
    specs = [ModelSpec(MODEL, "ding-de-en", engine="torch")]
    app = create_app(specs, access=access, background=False)
    with pytest.MonkeyPatch.context() as patch, live_server(app) as port:
        patch.setattr(deepl.http_client, "max_network_retries", 0)  # a refusal is final
        yield f"http://127.0.0.1:{port}/", db, key, app.state.registry.models["ding-de-en"]


def translated(model, text: str) -> str:
    """The served model's own translation of one sentence (greedy, as the server decodes)."""
    return model.api.translate([text], scores=False)[0].text


def new_key(db, **limits) -> str:
    from aiayn.serve.keys import KeyStore

    store = KeyStore(db)
    try:
        return store.add(**limits)[0]
    finally:
        store.close()


@pytest.fixture
def client(served):
    url, _, key, _ = served
    with closing(deepl.DeepLClient(key, server_url=url)) as c:
        yield c


def test_one_text_and_a_list_translate_as_the_model_does(served, client):
    *_, model = served
    one = client.translate_text(TEXT, target_lang="EN-US")
    assert one.text == translated(model, TEXT)
    assert (one.detected_source_lang, one.billed_characters) == ("DE", len(TEXT))
    both = client.translate_text([TEXT, OTHER], source_lang="de", target_lang="en-gb")
    assert [r.text for r in both] == [translated(model, TEXT), translated(model, OTHER)]
    assert [r.billed_characters for r in both] == [len(TEXT), len(OTHER)]


def test_tags_stay_around_their_words_and_ignored_tags_as_they_are(served, client):
    *_, model = served
    out = client.translate_text(
        'Das <b>Haus</b> ist <x id="1"></x> klein.',
        source_lang="DE",
        target_lang="EN-US",
        tag_handling="xml",
        ignore_tags=["x"],
    ).text
    assert out.count("<b>") == out.count("</b>") == 1 and '<x id="1"></x>' in out
    assert " ".join(re.sub(r"<[^>]+>", " ", out).split()) == translated(model, TEXT)
    html = client.translate_text(
        "<p>Das Haus ist klein.</p><p>Wo ist der Bahnhof?</p>",
        target_lang="EN-US",
        tag_handling="html",
    ).text
    assert html == f"<p>{translated(model, TEXT)}</p><p>{translated(model, OTHER)}</p>"


def test_a_glossary_puts_its_target_term_in_the_translation(served, client):
    *_, model = served
    assert "building" not in translated(model, TEXT)  # the glossary, not the model, adds it
    glossary = client.create_glossary("Begriffe", "DE", "EN", {"Haus": "building"})
    try:
        assert (glossary.ready, glossary.entry_count) == (True, 1)
        assert (glossary.source_lang, glossary.target_lang) == ("DE", "EN")
        out = client.translate_text_with_glossary(TEXT, glossary)  # into EN-GB
        assert "building" in out.text
        by_id = client.translate_text(
            TEXT, source_lang="DE", target_lang="EN-US", glossary=glossary.glossary_id
        )
        assert by_id.text == out.text
    finally:
        client.delete_glossary(glossary)


def test_glossaries_are_created_listed_read_and_deleted(client):
    entries = {"Haus": "house", "Bahnhof": "station"}
    glossary = client.create_glossary("Liste", "DE", "EN", entries)
    assert glossary.glossary_id in [g.glossary_id for g in client.list_glossaries()]
    again = client.get_glossary(glossary.glossary_id)
    assert (again.name, again.entry_count, again.creation_time) == (
        "Liste", 2, glossary.creation_time,
    )  # fmt: skip
    assert client.get_glossary_entries(glossary) == entries
    client.delete_glossary(glossary)
    assert glossary.glossary_id not in [g.glossary_id for g in client.list_glossaries()]
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_glossary(glossary.glossary_id)


def test_the_v3_glossaries_of_deepl_client_are_the_same_store(served, client):
    from deepl.api_data import MultilingualGlossaryDictionaryEntries as Dictionary

    *_, model = served
    made = client.create_multilingual_glossary("v3", [Dictionary("DE", "EN", {"Haus": "building"})])
    try:
        assert [(d.source_lang, d.target_lang, d.entry_count) for d in made.dictionaries] == [
            ("DE", "EN", 1)
        ]
        assert made.glossary_id in [g.glossary_id for g in client.list_multilingual_glossaries()]
        assert client.get_glossary(made.glossary_id).entry_count == 1  # v2's view of it
        (read,) = client.get_multilingual_glossary_entries(made, "DE", "EN").dictionaries
        assert read.entries == "Haus\tbuilding"  # the client hands v3's TSV over as it came
        out = client.translate_text(TEXT, source_lang="DE", target_lang="EN-US", glossary=made)
        assert "building" in out.text and "building" not in translated(model, TEXT)
        client.replace_multilingual_glossary_dictionary(
            made, Dictionary("DE", "EN", {"klein": "tiny"})
        )
        out = client.translate_text(TEXT, source_lang="DE", target_lang="EN-US", glossary=made)
        assert "tiny" in out.text and "building" not in out.text
    finally:
        client.delete_multilingual_glossary(made)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_multilingual_glossary(made.glossary_id)


def test_languages_are_the_served_ones_in_deepls_codes(client):
    assert [(lang.code, lang.name) for lang in client.get_source_languages()] == [("DE", "German")]
    targets = client.get_target_languages()
    assert [lang.code for lang in targets] == ["EN-GB", "EN-US"]
    assert {lang.supports_formality for lang in targets} == {False}
    assert [(p.source_lang, p.target_lang) for p in client.get_glossary_languages()] == [
        ("de", "en")
    ]


def test_usage_counts_this_keys_characters_against_its_quota(served):
    url, db, _, _ = served
    key = new_key(db, char_quota=2 * len(TEXT) + 1)
    with closing(deepl.Translator(key, server_url=url)) as translator:
        assert translator.get_usage().character.count == 0
        translator.translate_text([TEXT, TEXT], target_lang="EN-US")
        usage = translator.get_usage()
        assert (usage.character.count, usage.character.limit) == (2 * len(TEXT), 2 * len(TEXT) + 1)
        assert not usage.any_limit_reached
        with pytest.raises(deepl.QuotaExceededException, match="Quota"):
            translator.translate_text(TEXT, target_lang="EN-US")
        assert translator.get_usage().character.count == 2 * len(TEXT)  # nothing billed


def test_a_wrong_key_is_an_authorization_exception(served):
    url, *_ = served
    with closing(deepl.Translator("not-one-of-the-servers-keys", server_url=url)) as translator:
        with pytest.raises(deepl.AuthorizationException):
            translator.translate_text(TEXT, target_lang="EN-US")
        with pytest.raises(deepl.AuthorizationException):
            translator.get_usage()


def test_a_glossary_that_does_not_exist_is_not_found(client):
    missing = str(uuid.uuid4())
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_glossary(missing)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.delete_glossary(missing)
    with pytest.raises(deepl.DeepLException, match="Not found"):
        client.translate_text(TEXT, source_lang="DE", target_lang="EN-US", glossary=missing)


def test_documents_translate_whole(served, client, tmp_path):
    import docx

    *_, model = served
    source = tmp_path / "brief.docx"
    document = docx.Document()
    document.add_paragraph(TEXT)
    document.add_paragraph(OTHER)
    document.save(source)
    out = tmp_path / "letter.docx"
    status = client.translate_document_from_filepath(
        source, out, source_lang="DE", target_lang="EN-US"
    )
    assert status.done and status.billed_characters == len(TEXT) + len(OTHER)
    paragraphs = [p.text for p in docx.Document(out).paragraphs]
    assert paragraphs == [translated(model, TEXT), translated(model, OTHER)]
    text = tmp_path / "notiz.txt"
    text.write_text(f"{TEXT}\n\n{OTHER}\n", encoding="utf-8")
    client.translate_document_from_filepath(text, tmp_path / "note.txt", target_lang="EN-GB")
    assert (tmp_path / "note.txt").read_text(encoding="utf-8") == (
        f"{translated(model, TEXT)}\n\n{translated(model, OTHER)}\n"
    )


def test_a_quota_is_counted_once_by_two_server_processes(served, tmp_path):
    """Two ``aiayn serve`` processes on one key database: a key's characters sent to either
    count against its one quota."""
    from tests.serve.test_shared_limits import free_port

    _, _, _, model = served
    db = tmp_path / "keys.db"
    key = new_key(db, char_quota=2 * len(TEXT))
    ports = [free_port(), free_port()]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    command = [sys.executable, "-m", "aiayn.cli", "serve", str(MODEL), "--engine", "torch",
               "--threads", "1", "--api-keys", "--api-keys-db", str(db)]  # fmt: skip
    procs = [
        subprocess.Popen(
            [*command, "--port", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for port in ports
    ]
    try:
        for port, proc in zip(ports, procs, strict=True):
            wait_process_ready(port, proc)
        one, two = (deepl.Translator(key, server_url=f"http://127.0.0.1:{p}/") for p in ports)
        assert one.translate_text(TEXT, target_lang="EN-US").text == translated(model, TEXT)
        two.translate_text(TEXT, target_lang="EN-US")
        for translator in (one, two):
            with pytest.raises(deepl.QuotaExceededException):
                translator.translate_text("Ja.", target_lang="EN-US")
        assert one.get_usage().character.count == two.get_usage().character.count == 2 * len(TEXT)
        one.close()
        two.close()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
            proc.stdout.close()
