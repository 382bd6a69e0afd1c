"""Every format translated whole with the shipped model: the document comes back with the same
structure, opens in its format's library, each of its texts the model's translation of that
text (as ``translate`` gives it, so as ``/translate`` does), and the bold, italic and linked
runs of a paragraph still there."""

import io
import re
import shutil
import subprocess

import pytest

import aiayn
from aiayn import documents
from aiayn.cli import main
from tests.documents import samples

pytest.importorskip("docx")


@pytest.fixture(scope="module")
def translator(shipped_copy):
    return aiayn.load(shipped_copy)


def translated(translator, texts: list[str]) -> list[str]:
    return [" ".join(t.text.split()) for t in translator.translate(texts)]


def words(texts: list[str]) -> list[str]:
    return [" ".join(t.split()) for t in texts]


@pytest.mark.parametrize("ext", list(samples.FORMATS))
def test_each_text_comes_back_translated_in_the_same_structure(translator, tmp_path, ext):
    build, texts = samples.FORMATS[ext]
    source = tmp_path / f"in{ext}"
    source.write_bytes(build())
    out = translator.translate_file(source, tmp_path / f"out{ext}")
    before, after = texts(source.read_bytes()), texts(out.read_bytes())
    assert len(after) == len(before)
    assert words(after) == translated(translator, before)
    assert after != before


def test_a_word_paragraph_keeps_its_bold_italic_and_link_runs(translator, tmp_path):
    import docx

    source = tmp_path / "in.docx"
    source.write_bytes(samples.docx())
    out = docx.Document(translator.translate_file(source, tmp_path / "out.docx"))
    paragraph = out.paragraphs[0]
    runs = paragraph.runs
    assert len(runs) == 7 - 1  # the link's run sits inside its w:hyperlink
    assert [r.bold for r in runs].count(True) == 1 and [r.italic for r in runs].count(True) == 1
    (link,) = paragraph.hyperlinks
    assert link.address == "https://example.org/"
    assert (
        "".join(r.text for r in paragraph.iter_inner_content()).split()
        == translated(translator, [samples.paragraph_text()])[0].split()
    )


def test_word_footnotes_are_translated(translator, tmp_path):
    import zipfile

    from lxml import etree

    source = tmp_path / "in.docx"
    source.write_bytes(samples.docx_with_footnote())
    out = translator.translate_file(source, tmp_path / "out.docx")
    with zipfile.ZipFile(out) as archive:
        notes = etree.fromstring(archive.read("word/footnotes.xml"))
    (expected,) = translated(translator, [samples.NOTE])
    assert " ".join("".join(notes.itertext()).split()) == expected


def test_slides_keep_their_runs_and_notes(translator, tmp_path):
    import pptx

    source = tmp_path / "in.pptx"
    source.write_bytes(samples.pptx())
    out = pptx.Presentation(translator.translate_file(source, tmp_path / "out.pptx"))
    slide = out.slides[0]
    runs = slide.placeholders[1].text_frame.paragraphs[0].runs
    assert len(runs) == 7
    assert [r.font.bold for r in runs].count(True) == 1
    assert [r.font.italic for r in runs].count(True) == 1
    assert [r.hyperlink.address for r in runs].count("https://example.org/") == 1
    (note,) = translated(translator, [samples.NOTE])
    assert " ".join(slide.notes_slide.notes_text_frame.text.split()) == note


@pytest.mark.parametrize("ext", [".odt", ".odp"])
def test_opendocument_spans_and_links_stay(translator, tmp_path, ext):
    from odf import text
    from odf.opendocument import load

    build, _ = samples.FORMATS[ext]
    source = tmp_path / f"in{ext}"
    source.write_bytes(build())
    out = load(str(translator.translate_file(source, tmp_path / f"out{ext}")))
    first = out.getElementsByType(text.P)[0]
    names = [c.qname[1] for c in first.childNodes if c.nodeType == c.ELEMENT_NODE]
    assert names == ["span", "span", "a"]
    (link,) = out.getElementsByType(text.A)
    assert link.getAttribute("href") == "https://example.org/"


@pytest.mark.parametrize("ext", [".html", ".epub", ".srt"])
def test_markup_formats_keep_their_tags(translator, tmp_path, ext):
    import zipfile

    build, _ = samples.FORMATS[ext]
    source = tmp_path / f"in{ext}"
    source.write_bytes(build())
    data = translator.translate_file(source, tmp_path / f"out{ext}").read_bytes()
    if ext == ".epub":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            data = archive.read("EPUB/chapter.xhtml")
    page = data.decode()
    for tag in ("b", "i") + (("a",) if ext != ".srt" else ()):
        assert len(re.findall(f"<{tag}[ >]", page)) == 1, tag
    assert ext == ".srt" or 'href="https://example.org/"' in page


def test_the_command_line_writes_what_the_api_writes(translator, tmp_path, capsys):
    source = tmp_path / "in.srt"
    source.write_bytes(samples.srt())
    assert main(["translate", str(translator.path), "--file", str(source),
                 "--out", str(tmp_path / "cli.srt")]) == 0  # fmt: skip
    api = translator.translate_file(source, tmp_path / "api.srt")
    assert (tmp_path / "cli.srt").read_bytes() == api.read_bytes()
    assert "wrote" in capsys.readouterr().err


def test_the_command_line_replaces_an_existing_out_only_with_force(translator, tmp_path, capsys):
    """``--out`` naming a file that exists was overwritten without a word."""
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("Guten Morgen.\n")
    out.write_text("kept\n")
    argv = ["translate", str(translator.path), "--engine", "torch", "--file", str(source)]
    argv += ["--out", str(out)]
    assert main(argv) == 2
    assert f"--out {out} exists; choose another or add --force" in capsys.readouterr().err
    assert out.read_text() == "kept\n"
    assert main([*argv[:-1], str(tmp_path), "--force"]) == 2  # a directory: never
    assert f"--out {tmp_path} is a directory" in capsys.readouterr().err
    assert main(["translate", str(translator.path), "--force"]) == 2  # nothing to replace
    assert "--force applies to --file and --out" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    assert out.read_text().strip() not in ("", "kept")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--file", "x.exe", "--out", "y.exe"], "--file x.exe: file format not supported"),
        (["--file", "x.txt"], "--out: --file and --out go together"),
        (["--file", "x.txt", "--out", "y.txt", "--alignment"], "--alignment does not apply"),
        (["--file", "x.txt", "--out", "./x.txt"], "out: x.txt is the input x.txt itself"),
    ],
)
def test_the_command_line_refuses_clearly(translator, capsys, flags, message):
    assert main(["translate", str(translator.path), *flags]) == 2
    assert message in capsys.readouterr().err


def test_texts_without_a_letter_are_kept_as_written(translator, tmp_path):
    import docx

    document = docx.Document()
    document.add_paragraph("Der Hund schläft.")
    table = document.add_table(rows=1, cols=3)
    for cell, text in zip(table.rows[0].cells, ("2024", "3,5 %", "-- 7 --"), strict=True):
        cell.text = text
    document.save(tmp_path / "in.docx")
    out = docx.Document(translator.translate_file(tmp_path / "in.docx", tmp_path / "out.docx"))
    assert [c.text for c in out.tables[0].rows[0].cells] == ["2024", "3,5 %", "-- 7 --"]
    assert out.paragraphs[0].text != "Der Hund schläft."


def test_a_file_is_written_in_its_own_format_and_not_over_on_failure(translator, tmp_path):
    source = tmp_path / "in.docx"
    source.write_bytes(b"PK\x03\x04 not really")
    out = tmp_path / "out.docx"
    out.write_bytes(b"before")
    with pytest.raises(documents.DocumentError, match=r"^in\.docx: not a \.docx"):
        translator.translate_file(source, out)
    assert out.read_bytes() == b"before"
    with pytest.raises(aiayn.errors.OptionError, match="written back in its own format"):
        translator.translate_file(source, tmp_path / "out.odt")


def test_a_file_is_never_written_over_itself(translator, tmp_path):
    source = tmp_path / "in.txt"
    source.write_bytes(b"Der Hund schl\xc3\xa4ft.\n")
    (tmp_path / "link.txt").symlink_to(source)
    for out in (source, tmp_path / "." / "in.txt", tmp_path / "link.txt"):
        with pytest.raises(aiayn.errors.OptionError, match=f"out: {out} is the input {source}"):
            translator.translate_file(source, out)
    assert source.read_bytes() == b"Der Hund schl\xc3\xa4ft.\n"


SOFFICE = shutil.which("soffice") or shutil.which("libreoffice")


@pytest.mark.skipif(SOFFICE is None, reason="LibreOffice is not installed")
@pytest.mark.parametrize("ext", [".docx", ".odt"])
def test_libreoffice_converts_the_translation(translator, tmp_path, ext):
    build, _ = samples.FORMATS[ext]
    source = tmp_path / f"in{ext}"
    source.write_bytes(build())
    out = translator.translate_file(source, tmp_path / f"out{ext}")
    run = subprocess.run(
        [SOFFICE, "--headless", f"-env:UserInstallation=file://{tmp_path}/profile",
         "--convert-to", "txt:Text", "--outdir", str(tmp_path / "txt"), str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "txt" / "out.txt").read_text(encoding="utf-8-sig")
    (first,) = translated(translator, [samples.paragraph_text()])
    assert " ".join(first.split()) in " ".join(text.split())
