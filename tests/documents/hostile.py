"""Malformed and hostile uploads, built here (no binary committed): zip bombs (plain, lying
about their sizes, many members), XML bombs and external entities, names that climb out of
the archive, encrypted, truncated, damaged, empty and mislabelled files. ``CASES``: (label,
file name, bytes, what the refusal must say); ``BOUNDED``: files read, not refused, whose
cost must stay bounded all the same (label, file name, bytes)."""

from __future__ import annotations

import io
import struct
import zipfile

from tests.documents import samples

# what the tests read with: a bomb need not be large to pass these
LIMITS = dict(max_bytes=2_000_000, max_inflated=20_000_000, max_members=500, max_chars=50_000)


def zipped(members: list[tuple[str, bytes]], method=zipfile.ZIP_DEFLATED) -> bytes:
    import warnings

    out = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(out, "w", method) as archive:
        warnings.simplefilter("ignore")  # a duplicate name is what one case is made of
        for name, data in members:
            archive.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return out.getvalue()


def members_of(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(i.filename, archive.read(i)) for i in archive.infolist()]


def replaced(data: bytes, name: str, content: bytes) -> bytes:
    """The archive ``data`` with member ``name``'s bytes replaced."""
    return zipped([(n, content if n == name else d) for n, d in members_of(data)])


def added(data: bytes, name: str, content: bytes) -> bytes:
    return zipped(members_of(data) + [(name, content)])


def lying(data: bytes, name: str, size: int) -> bytes:
    """``data`` with member ``name``'s declared inflated size set to ``size`` in both its
    local header and the central directory (its real bytes unchanged)."""
    raw = bytearray(data)
    encoded = name.encode()
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = 0
        while (at := raw.find(signature, at)) >= 0:
            header = 30 if signature == b"PK\x03\x04" else 46
            length = struct.unpack_from("<H", raw, at + (26 if header == 30 else 28))[0]
            if raw[at + header : at + header + length] == encoded:
                struct.pack_into("<I", raw, at + offset, size)
            at += 4
    return bytes(raw)


def flagged(data: bytes, name: str, bit: int) -> bytes:
    """``data`` with general-purpose flag ``bit`` set on member ``name`` (central
    directory and local header): bit 0 says the member is encrypted."""
    raw = bytearray(data)
    encoded = name.encode()
    for signature, flags, header, length_at in ((b"PK\x03\x04", 6, 30, 26),
                                                (b"PK\x01\x02", 8, 46, 28)):  # fmt: skip
        at = 0
        while (at := raw.find(signature, at)) >= 0:
            length = struct.unpack_from("<H", raw, at + length_at)[0]
            if raw[at + header : at + header + length] == encoded:
                value = struct.unpack_from("<H", raw, at + flags)[0] | (1 << bit)
                struct.pack_into("<H", raw, at + flags, value)
            at += 4
    return bytes(raw)


def method(data: bytes, name: str, number: int) -> bytes:
    """``data`` with member ``name``'s compression method set to ``number``."""
    raw = bytearray(data)
    encoded = name.encode()
    for signature, field, header, length_at in ((b"PK\x03\x04", 8, 30, 26),
                                                (b"PK\x01\x02", 10, 46, 28)):  # fmt: skip
        at = 0
        while (at := raw.find(signature, at)) >= 0:
            length = struct.unpack_from("<H", raw, at + length_at)[0]
            if raw[at + header : at + header + length] == encoded:
                struct.pack_into("<H", raw, at + field, number)
            at += 4
    return bytes(raw)


def damaged(data: bytes, name: str) -> bytes:
    """``data`` with a byte inside member ``name``'s compressed data flipped."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo(name)
    raw = bytearray(data)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    raw[start + info.compress_size // 2] ^= 0xFF
    return bytes(raw)


BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + b"".join(
        b'<!ENTITY lol%d "%s">' % (k, (b"&lol%d;" % (k - 1) if k > 1 else b"&lol;") * 10)
        for k in range(1, 10)
    )
    + b']><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    b"<w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>"
)
XXE = (
    b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
    b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    b"<w:body><w:p><w:r><w:t>&xxe;</w:t></w:r></w:p></w:body></w:document>"
)
XXE_PARAMETER = (
    b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY % remote SYSTEM "http://127.0.0.1:9/x.dtd">'
    b"%remote;]><office:document-content "
    b'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"/>'
)
EXTERNAL_DTD = (
    b'<?xml version="1.0"?><!DOCTYPE w:document SYSTEM "http://127.0.0.1:9/evil.dtd">'
    b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    b"<w:body/></w:document>"
)


def cases() -> list[tuple[str, str, bytes, str]]:
    docx, odt, epub, pptx = samples.docx(), samples.odt(), samples.epub(), samples.pptx()
    zeros = b"\0" * 30_000_000  # compresses to ~30 KB, inflates past LIMITS' 20 MB
    bomb = zipped([("[Content_Types].xml", b"<x/>"), ("word/document.xml", zeros)])
    body = "word/document.xml"
    return [
        ("empty .docx", "empty.docx", b"", "an empty file"),
        ("empty .txt", "empty.txt", b"", "an empty file"),
        ("empty .po", "empty.po", b"", "an empty file"),
        ("empty zip as .odt", "e.odt", zipped([]), "mimetype is none"),
        ("zip bomb", "bomb.docx", bomb, "inflates past 20000000 bytes"),
        ("zip bomb, stored as an epub", "bomb.epub",
         zipped([("mimetype", b"application/epub+zip"), ("x.bin", zeros)]),
         "inflates past"),
        ("a member lying small about its size", "liar.docx",
         lying(replaced(docx, body, zeros[:5_000_000]), body, 1000), "damaged or truncated"),
        ("a member in an unknown compression", "method.docx", method(docx, body, 99),
         "compression method"),
        ("too many members", "many.docx",
         zipped([(f"m{k}.bin", b"") for k in range(600)]), "600 archive members; at most 500"),
        ("billion laughs", "laughs.docx", replaced(docx, body, BILLION_LAUGHS), "has a DTD"),
        ("external entity (file)", "xxe.docx", replaced(docx, body, XXE), "has a DTD"),
        ("external parameter entity", "xxe.odt", replaced(odt, "content.xml", XXE_PARAMETER),
         "refused"),
        ("external DTD", "dtd.docx", replaced(docx, body, EXTERNAL_DTD), "has a DTD"),
        ("billion laughs in an epub chapter", "laughs.epub",
         replaced(epub, "EPUB/chapter.xhtml", BILLION_LAUGHS), "declares entities"),
        ("member climbing out with ..", "climb.docx", added(docx, "../../evil.xml", b"<x/>"),
         "climbs out with '..'"),
        ("absolute member name", "abs.docx", added(docx, "/etc/evil.xml", b"<x/>"),
         "absolute path"),
        ("backslash member name", "slash.docx", added(docx, "..\\evil.xml", b"<x/>"),
         "backslash"),
        ("duplicate member", "twice.docx", added(docx, body, b"<x/>"), "appears twice"),
        ("encrypted member", "locked.docx", flagged(docx, body, 0), "encrypted"),
        ("password-protected Office file", "locked2.docx",
         b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600, "OLE compound file"),
        ("encrypted OpenDocument", "locked.odt",
         replaced(odt, "META-INF/manifest.xml",
                  members_dict(odt)["META-INF/manifest.xml"].replace(
                      b"</manifest:manifest>",
                      b"<manifest:encryption-data/></manifest:manifest>")),
         "encrypted"),
        ("truncated .docx", "half.docx", docx[: len(docx) // 2], "not a .docx"),
        ("damaged member data", "flipped.docx", damaged(docx, body), "damaged or truncated"),
        ("XML that is not well formed", "broken.docx",
         replaced(docx, body, b"<w:document><w:body>"), "not well-formed XML"),
        ("an .odt named .docx", "odt.docx", odt, "has no [Content_Types].xml"),
        ("a .docx named .odt", "docx.odt", docx, "mimetype is none"),
        ("a .pptx named .docx", "pptx.docx", pptx, "has no word/document.xml"),
        ("a .docx named .epub", "docx.epub", docx, "mimetype is none"),
        ("a .docx named .txt", "docx.txt", docx, "not UTF-8 text"),
        ("a PNG named .srt", "image.srt", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "not UTF-8 text"),
        ("text named .docx", "text.docx", b"Das ist kein Archiv.", "not a .docx"),
        ("NUL in text", "nul.txt", b"Guten\0Morgen", "a NUL character"),
        ("not subtitles", "words.srt", b"Das sind keine Untertitel.\n", "not SubRip"),
        ("HTML nested 10000 deep", "deep.html", b"<p>" + b"<span>" * 10000 + b"x", "nested over"),
        ("HTML whose tags never end", "open.html", b"<a " * 70_000, "nested over"),
        ("HTML hiding its tags behind a '<' in a value", "hidden.html",
         b'<div title="<">' * 1000, "nested over"),
        ("subtitles whose tags never end", "open.srt",
         b"1\n00:00:01,000 --> 00:00:02,000\n" + b"<i " * 70_000 + b"\n", "nested over"),
        ("HTML the parser would repair", "stray.html", b"<p>gut</b></p>", "closes no element"),
        ("too large", "large.txt", b"a" * 2_000_001, "2000001 bytes; at most 2000000"),
        ("too much text", "long.txt", (b"Wort " * 12_000), "characters of text; at most 50000"),
        ("a paragraph of 2000 lines broken by <br>", "lines.html", b"<p>" + b"Haus<br>" * 2000,
         "at most 1,000,000 words times elements in one paragraph"),
    ]  # fmt: skip


def bounded() -> list[tuple[str, str, bytes]]:
    """Hostile files that are read (nothing in them is wrong as such) at a bounded cost:
    (label, file name, bytes); their texts stay short."""
    odt = samples.odt()
    content = members_dict(odt)["content.xml"]
    spaces = b'Das ist ein <text:s text:c="1000000"/>' * 4
    return [
        ("an .odt asking for 4 million spaces", "spaces.odt",
         replaced(odt, "content.xml", content.replace(b"Das ist ein ", spaces, 1))),
    ]  # fmt: skip


def members_dict(data: bytes) -> dict[str, bytes]:
    return dict(members_of(data))


CASES = cases()
BOUNDED = bounded()
