"""HTML translated with the shipped model through the API, the command line and LibreTranslate's
``format: "html"``: a real German help page keeps every tag and attribute, its text is the
model's translation of its sentences, and malformed markup is a clear error (4xx over HTTP)."""

import io
from pathlib import Path

import pytest

import aiayn
from aiayn.cli import main
from aiayn.data.markup import MarkupError, Sentences, parse
from tests.data.test_markup import html5lib_tree, lxml_tree

PAGE = Path(__file__).parents[1] / "data" / "html" / "macrosecurity.de.html"
FRAGMENT = '<p>Das ist ein <b>gutes</b> Buch.</p><p title="Hund">Der Hund schläft.</p>'


@pytest.fixture(scope="module")
def translator(shipped_copy):
    return aiayn.load(shipped_copy)


def expected_text(translator, html: str, beam: int = 1) -> list[list[str]]:
    """The words of each segment of ``html`` translated sentence by sentence."""
    sentences = Sentences([parse(html)], lambda text: True)
    out = translator.translate(sentences.texts, beam=beam)
    return [t.text.split() for t in out]


def segment_words(html: str) -> list[str]:
    return [w for s in parse(html).segments for w in s.words]


def test_a_help_page_keeps_its_tags_and_attributes_and_holds_the_translation(translator):
    html = PAGE.read_text(encoding="utf-8")
    (out,) = translator.translate_html([html], beam=2)
    assert html5lib_tree(out) == html5lib_tree(html)
    assert lxml_tree(out) == lxml_tree(html)
    want = [w for words in expected_text(translator, html, beam=2) for w in words]
    assert segment_words(out) == want
    assert "<script" in out and 'src="help2.js"' in out and "Makrosicherheit" not in out


def test_documents_are_translated_together_and_in_order(translator):
    one, two = translator.translate_html([FRAGMENT, "<h1>Guten Morgen</h1>"])
    assert one == translator.translate_html([FRAGMENT])[0]
    assert segment_words(two) == [w for ws in expected_text(translator, "<h1>Guten Morgen</h1>")
                                  for w in ws]  # fmt: skip
    assert 'title="Hund"' in one and "<b>" in one


def test_malformed_markup_is_refused_naming_the_document(translator):
    with pytest.raises(MarkupError, match=r"^document 2: line 1, column \d+: end tag </i>"):
        translator.translate_html(["<p>gut</p>", "<p><b>schlecht</i></p>"])
    with pytest.raises(MarkupError, match="^index.html: line 2"):
        translator.translate_html(["<p>ok</p>\n<p>x</span>"], names=["index.html"])


def test_the_command_line_writes_the_page_the_api_gives(translator, monkeypatch, capsys):
    html = PAGE.read_text(encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO(html))
    assert main(["translate", str(translator.path), "--format", "html", "--beam", "2"]) == 0
    assert capsys.readouterr().out == translator.translate_html([html], beam=2)[0] + "\n"


@pytest.mark.parametrize(
    "stdin, flags, message",
    [
        ("<p>a</b></p>", [], "stdin: line 1, column 8: end tag </b>"),
        ("<p>a</p>", ["--alignment"], "--alignment applies to --format text"),
        ("<p>a</p>", ["--nbest", "2", "--beam", "2"], "--nbest applies to --format text"),
    ],
)
def test_the_command_line_refuses_clearly(translator, monkeypatch, capsys, stdin, flags, message):
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert main(["translate", str(translator.path), "--format", "html", *flags]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


@pytest.fixture(scope="module")
def client(translator):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx2")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec
    from tests.serve.conftest import wait_ready

    config = ServeConfig(max_chars=5000, beam=2)
    with TestClient(create_app([ModelSpec(translator.path, "ding")], config)) as c:
        wait_ready(c)
        yield c


def test_libretranslate_format_html_gives_the_page_the_api_gives(translator, client):
    html = PAGE.read_text(encoding="utf-8")
    body = {"q": html, "source": "de", "target": "en", "format": "html"}
    r = client.post("/translate", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == {"translatedText": translator.translate_html([html], beam=2)[0]}
    r = client.post("/translate", data={**body, "q": [FRAGMENT, "<p></p>"], "source": "auto"})
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == [
        translator.translate_html([FRAGMENT], beam=2)[0],
        "<p></p>",
    ]
    page, empty = r.json()["detectedLanguage"]
    assert page["language"] == "de" and 50 < page["confidence"] <= 100  # found by its words
    assert empty == {"language": "de", "confidence": 0.0}  # none: as it came


@pytest.mark.parametrize(
    "fields, field, words",
    [
        ({"q": "<p>gut</p>\n<b>x</i>"}, "q", ["q: line 2, column 8", "end tag </i>"]),
        ({"q": ["<p>a</p>", "<p title='x"]}, "q", ["q[1]: line 1", "end of file"]),
        ({"q": "<p>a</p>", "prefix": "The"}, "prefix", ["format 'text'"]),
        ({"q": "<p>" + "x" * 4994 + "</p>"}, "q", ["request (5001) exceeds text limit (5000)"]),
    ],
)
def test_libretranslate_html_errors_are_4xx_naming_the_field(client, fields, field, words):
    r = client.post("/translate", json={"source": "de", "target": "en", "format": "html", **fields})
    assert r.status_code == 400, r.text  # LibreTranslate answers 400
    assert all(w in r.json()["error"] for w in words), r.json()


def test_the_command_line_reads_html_as_utf8_naming_a_bad_byte(translator, monkeypatch, capsys):
    raw = io.BytesIO("<p>gut</p>\n<p>Gr\xfc\xdfe</p>\n".encode("latin-1"))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(raw))
    assert main(["translate", str(translator.path), "--format", "html"]) == 2
    assert "stdin, line 2: not UTF-8 (byte 0xfc at column 6)" in capsys.readouterr().err


def test_a_kept_span_holding_a_sentence_end_is_kept_whole(translator, tmp_path):
    """A page (and a document) is cut into sentences: "{% trans 'Hallo!' %}" was cut after
    its "!", and kept in neither sentence."""
    from aiayn.errors import UserError

    span = "{% trans 'Hallo!' %}"
    html = f"<p>Bitte {span} lesen. Danke.</p>"
    (page,) = translator.translate_html([html], keep=aiayn.PLACEHOLDERS)
    assert span in page, page
    note = tmp_path / "note.txt"
    note.write_text(f"Bitte {span} lesen. Danke.\n", encoding="utf-8")
    out = translator.translate_file(note, tmp_path / "out.txt", keep=aiayn.PLACEHOLDERS)
    assert span in out.read_text(encoding="utf-8")
    with pytest.raises(UserError, match=r"keep: '\(x' is not a regular expression"):
        translator.translate_html([html], keep=["(x"])
