"""Gettext catalogues: every message a person has not translated gets the model's translation
and the fuzzy flag, plural messages every form the catalogue counts, placeholders kept whole
(msgfmt's own format check agrees), a person's translations kept."""

import shutil
import subprocess

import pytest

import aiayn
from aiayn import documents
from aiayn.documents.gettext import PLACEHOLDER

polib = pytest.importorskip("polib")

CATALOGUE = r"""# A test catalogue.
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Language: en\n"
"Plural-Forms: nplurals=3; plural=(n==1 ? 0 : n==2 ? 1 : 2);\n"

msgid "Der Hund schläft."
msgstr ""

#, python-format
msgid "Hallo %(name)s, das ist ein gutes Buch."
msgstr ""

#, python-brace-format
msgid "Ich habe {count} Bücher und keine Zeit.\n"
msgstr ""

#, python-format
msgid "%d Datei"
msgid_plural "%d Dateien"
msgstr[0] ""
msgstr[1] ""
msgstr[2] ""

#, python-format
msgid "%s ist gut."
msgstr ""

msgid "Guten Morgen."
msgstr "Good morning, by a person."

#, fuzzy
msgid "Vielen Dank."
msgstr "An old suggestion."

#~ msgid "Alte Nachricht."
#~ msgstr ""
"""


@pytest.fixture(scope="module")
def translated(shipped_copy, tmp_path_factory):
    translator = aiayn.load(shipped_copy)
    folder = tmp_path_factory.mktemp("po")
    source = folder / "de.po"
    source.write_text(CATALOGUE, encoding="utf-8")
    out = translator.translate_file(source, folder / "en.po")
    return translator, out, polib.pofile(str(out))


def test_every_message_is_filled_and_marked_fuzzy(translated):
    _, _, catalogue = translated
    live = [e for e in catalogue if not e.obsolete]
    assert len(live) == 7
    for entry in live:
        assert entry.msgstr or all(entry.msgstr_plural.values()), entry.msgid
    machine = [e for e in live if e.msgid != "Guten Morgen."]
    assert all("fuzzy" in e.flags for e in machine)
    (person,) = [e for e in live if e.msgid == "Guten Morgen."]
    assert person.msgstr == "Good morning, by a person." and "fuzzy" not in person.flags
    (old,) = [e for e in live if e.msgid == "Vielen Dank."]
    assert old.msgstr != "An old suggestion."


def test_a_message_is_translated_as_translate_translates_it(translated):
    translator, _, catalogue = translated
    (expected,) = translator.translate(["Der Hund schläft."])
    assert catalogue.find("Der Hund schläft.").msgstr == expected.text


def test_plural_forms_and_placeholders_are_kept(translated):
    _, _, catalogue = translated
    plural = catalogue.find("%d Datei")
    assert sorted(plural.msgstr_plural) == [0, 1, 2]
    assert all(plural.msgstr_plural[k].count("%d") == 1 for k in (0, 1, 2))
    assert plural.msgstr_plural[1] == plural.msgstr_plural[2] != plural.msgstr_plural[0]
    for entry in catalogue:
        if entry.obsolete or not entry.msgid or entry.msgid_plural:
            continue
        assert sorted(PLACEHOLDER.findall(entry.msgstr)) == sorted(
            PLACEHOLDER.findall(entry.msgid)
        ), entry.msgid
    assert catalogue.find("Ich habe {count} Bücher und keine Zeit.\n").msgstr.endswith("\n")


def test_a_placeholder_keeps_its_place_and_the_punctuation_against_it():
    """With every word translated as itself (and aligned to itself), a message comes back as
    it was: placeholders, the comma written against one, the line break at the end."""
    from aiayn.data.markup import Sentences

    text = 'msgid "Hallo %(name)s, du hast {n} neue %s Nachrichten.\\n"\nmsgstr ""\n'
    opened = documents.read(text.encode(), "de.po")
    sentences = Sentences(opened.documents, lambda t: True)
    assert sentences.texts == ["Hallo , du hast neue Nachrichten."]
    sentences.write([(t, [(i, i) for i in range(len(t.split()))]) for t in sentences.texts])
    (entry,) = polib.pofile(opened.save().decode())
    assert entry.msgstr == "Hallo %(name)s, du hast {n} neue %s Nachrichten.\n"


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="gettext's msgfmt is not installed")
def test_msgfmt_checks_the_translated_catalogue(translated, tmp_path):
    _, out, _ = translated
    run = subprocess.run(
        ["msgfmt", "--check", "--use-fuzzy", "-o", str(tmp_path / "en.mo"), str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr


def test_a_percent_sign_or_brace_the_model_writes_is_escaped_in_a_format_string(tmp_path):
    """A literal ``%`` in a python-format message is ``%%`` (msgfmt counts a lone one as a
    format specification), a brace in a brace format doubled; placeholders stay as they are."""
    from aiayn.data.markup import Sentences

    text = (
        'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        '#, python-format\nmsgid "Noch %s Minuten."\nmsgstr ""\n\n'
        '#, python-brace-format\nmsgid "Noch {n} Minuten."\nmsgstr ""\n'
    )
    opened = documents.read(text.encode(), "de.po")
    sentences = Sentences(opened.documents, lambda t: True)
    assert sentences.texts == ["Noch Minuten.", "Noch Minuten."]
    sentences.write([("Still 100% {of} minutes.", [(0, 0)])] * 2)
    out = tmp_path / "en.po"
    out.write_bytes(opened.save())
    printf, brace = polib.pofile(str(out))
    assert printf.msgstr == "Still %s 100%% {of} minutes."
    assert brace.msgstr == "Still {n} 100% {{of}} minutes."
    if shutil.which("msgfmt"):
        run = subprocess.run(
            ["msgfmt", "--check", "--use-fuzzy", "-o", str(tmp_path / "en.mo"), str(out)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr


def test_a_catalogue_naming_a_file_is_not_that_file(tmp_path):
    secret = tmp_path / "secret.po"
    secret.write_text('msgid "geheim"\nmsgstr ""\n', encoding="utf-8")
    with pytest.raises(documents.DocumentError, match="not a gettext catalogue"):
        documents.read(str(secret).encode(), "upload.po")


def test_a_broken_catalogue_names_its_line():
    with pytest.raises(documents.DocumentError, match=r"^bad\.po: not a gettext catalogue.*line"):
        documents.read(b'msgid "a"\nmsgstr "b"\n\ngarbage here\n', "bad.po")


def test_a_catalogue_declaring_another_charset_is_written_back_in_utf8(tmp_path):
    """ISO-8859-1 cannot hold every translation ("—", "€" is not in it): the catalogue is
    written in UTF-8 (as its download is labelled), the header saying so."""
    text = (
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=ISO-8859-1\\n"\n\n'
        'msgid "Der Preis in Euro."\nmsgstr ""\n'
    )
    opened = documents.read(text.encode("latin-1"), "de.po")
    sentences = documents.sentences(opened, lambda t: True)
    data = documents.save(opened, sentences, [("The price — in €.", [(0, 0)])], "de.po")
    out = tmp_path / "en.po"
    out.write_bytes(data)
    catalogue = polib.pofile(str(out))
    assert catalogue.metadata["Content-Type"] == "text/plain; charset=UTF-8"
    (entry,) = catalogue
    assert entry.msgstr == "The price — in €."
    assert data.decode("utf-8")


def test_positional_printf_placeholders_are_placeholders():
    """C-format's positional arguments ("%1$s", common in catalogues) were read as words."""
    text = 'msgid "Datei %1$s von %2$d gelöscht."\nmsgstr ""\n'
    opened = documents.read(text.encode(), "de.po")
    from aiayn.data.markup import Sentences

    assert Sentences(opened.documents, lambda t: True).texts == ["Datei von gelöscht."]
    assert PLACEHOLDER.findall("%1$s, %2$5.2f, %(n)s") == ["%1$s", "%2$5.2f", "%(n)s"]


def test_a_hostile_message_is_read_in_time_in_proportion_to_it():
    """Messages of characters two parts of the placeholder expression (or of the one that
    kept a message's edges) could both take: each took 9 s or more to read (the time grew
    with the square of the message; an upload of a megabyte, hours)."""
    import time

    from aiayn.data.markup import Sentences

    hostile = [
        "a" + " " * 64_000 + "b",  # white space inside
        "%" + "0" * 24_000 + "y",  # "0": a flag or a width
        "%(" * 50_000,  # a mapping key holding "%("
        "{a." + ":" * 48_000,  # ":": a field's or a format spec's
    ]
    for message in hostile:
        text = f'msgid "{message}"\nmsgstr ""\n'
        start = time.perf_counter()
        opened = documents.read(text.encode(), "de.po")
        Sentences(opened.documents, lambda t: True)
        assert time.perf_counter() - start < 2, message[:8]
    # the same placeholders as before
    assert PLACEHOLDER.findall("%05d %-010.2f %00d %10s %(a.b)s {0.x:>10} {a[b:c]} {a.b!r}") == [
        "%05d", "%-010.2f", "%00d", "%10s", "%(a.b)s", "{0.x:>10}", "{a[b:c]}", "{a.b!r}",
    ]  # fmt: skip
