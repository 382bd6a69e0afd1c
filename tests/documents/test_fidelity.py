"""What a translated document keeps besides its words: an e-book chapter's head and the
navigation document's landmarks, a Word field's result and a tracked change where they
stood, a catalogue message's line breaks and markup, a subtitle's lines; each checked with
the shipped model on a document built here with its format's library (or, where the
library cannot write the part, its XML)."""

import io
import zipfile

import pytest

import aiayn

pytest.importorskip("docx")


@pytest.fixture(scope="module")
def translator(shipped_copy):
    return aiayn.load(shipped_copy)


CHAPTER = (
    '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
    '<html xmlns="http://www.w3.org/1999/xhtml" lang="de"><head><title>Das Haus</title>'
    '<link rel="stylesheet" type="text/css" href="style.css"/></head>'
    '<body class="chapter" id="top"><h1>Das Haus</h1><p>Ich habe keine Zeit.</p></body></html>'
)
NAV = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
    "<head><title>Inhalt</title></head><body>"
    '<nav epub:type="toc" id="toc"><h1>Inhalt</h1><ol><li><a href="c1.xhtml">Das Haus</a></li>'
    '</ol></nav><nav epub:type="landmarks" hidden=""><ol><li>'
    '<a epub:type="bodymatter" href="c1.xhtml">Der Garten</a></li></ol></nav></body></html>'
)
OPF = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid">'
    '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="uid">x</dc:identifier>'
    "<dc:title>Das Buch</dc:title><dc:language>de</dc:language></metadata><manifest>"
    '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
    '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
    '<item id="css" href="style.css" media-type="text/css"/>'
    '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
    '<spine toc="ncx"><itemref idref="nav"/><itemref idref="c1"/></spine></package>'
)
NCX = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><head/>'
    "<docTitle><text>Das Buch</text></docTitle><navMap>"
    '<navPoint id="p1"><navLabel><text>Das Haus</text></navLabel><content src="c1.xhtml"/>'
    "</navPoint></navMap></ncx>"
)


def epub_as_written_by_an_editor() -> bytes:
    """An EPUB 3 as an editor writes it (not ebooklib): a chapter whose head links its
    stylesheet, a navigation document with landmarks."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
            'opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" '
            'media-type="application/oebps-package+xml"/></rootfiles></container>',
        )
        for member, text in (
            ("content.opf", OPF),
            ("c1.xhtml", CHAPTER),
            ("nav.xhtml", NAV),
            ("toc.ncx", NCX),
            ("style.css", "p { color: red }"),
        ):
            archive.writestr(f"OEBPS/{member}", text)
    return out.getvalue()


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename.rsplit("/", 1)[-1]: archive.read(info) for info in archive.infolist()}


def test_an_epub_chapter_keeps_its_head_and_the_navigation_its_landmarks(translator, tmp_path):
    from ebooklib import epub
    from lxml import etree

    source = tmp_path / "in.epub"
    source.write_bytes(epub_as_written_by_an_editor())
    out = translator.translate_file(source, tmp_path / "out.epub")
    written = members(out.read_bytes())
    chapter = etree.fromstring(written["c1.xhtml"])
    ns = {"x": "http://www.w3.org/1999/xhtml"}
    (link,) = chapter.findall("x:head/x:link", ns)
    assert link.get("href") == "style.css"
    (house,) = (t.text for t in translator.translate(["Das Haus"]))
    assert chapter.find("x:head/x:title", ns).text == house
    body = chapter.find("x:body", ns)
    assert (body.get("class"), body.get("id")) == ("chapter", "top")
    assert body.find("x:h1", ns).text == house
    nav = etree.fromstring(written["nav.xhtml"])
    kinds = [n.get("{http://www.idpf.org/2007/ops}type") for n in nav.iter("{*}nav")]
    assert kinds == ["toc", "landmarks"]
    assert [a.text for a in nav.iter("{*}a")] == [
        t.text for t in translator.translate(["Das Haus", "Der Garten"])
    ]
    assert written["style.css"] == b"p { color: red }"
    book = epub.read_epub(str(out))  # opens in ebooklib
    assert [link.title for link in book.toc] == [house]
