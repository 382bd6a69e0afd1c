"""Reading an upload before any format library sees it: every file is hostile until read.

An archive (.docx, .pptx, .odt, .odp, .epub are zip archives) is opened with ``zipfile`` and
every member inflated in bounded chunks, counting the bytes that come out: a member's declared
size can lie, and ``ZipFile.read`` trusts it, so the count stops at ``Limits.max_inflated``
for the whole archive. Encrypted members, names that would leave a folder (``..``, absolute,
a drive, a backslash, NUL), duplicate names and damaged data (a bad checksum, a truncated
stream) are refused. Every XML member is parsed with defusedxml, which refuses entity
declarations and external references (a billion-laughs bomb, XXE): the libraries that read
the archive next (python-docx, python-pptx, odfpy, ebooklib) see only checked bytes. Every
refusal is a ``DocumentError`` naming the file, the member and the problem.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from xml.etree.ElementTree import ParseError

from aiayn.documents.base import DocumentError, Limits

CHUNK = 1 << 16
XML_ENDINGS = (".xml", ".rels", ".xhtml", ".htm", ".html", ".opf", ".ncx", ".svg")


def check_size(data: bytes, name: str, limits: Limits) -> None:
    if not data:
        raise DocumentError(f"{name}: an empty file")
    if len(data) > limits.max_bytes:
        raise DocumentError(f"{name}: {len(data)} bytes; at most {limits.max_bytes}")


def decode_text(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text (a byte-order mark dropped); anything else refused, naming the
    first byte that is not UTF-8 and its line."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DocumentError(
            f"{name}: not UTF-8 text: byte 0x{data[e.start]:02x} at position {e.start} (line "
            f"{line}); a binary file, or text in another encoding (save it as UTF-8)"
        ) from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise DocumentError(f"{name}: a NUL character on line {line}: not a text file")
    return text


def _unsafe_name(member: str) -> str | None:
    """Why a member's name would leave the folder it is unpacked in (None: it would not)."""
    if "\0" in member:
        return "holds a NUL character"
    if "\\" in member:
        return "holds a backslash"
    if member.startswith("/") or (len(member) > 1 and member[1] == ":"):
        return "is an absolute path"
    if ".." in member.split("/"):
        return "climbs out with '..'"
    return None


def check_xml(data: bytes, where: str, dtd: bool = False) -> None:
    """Parse ``data`` with defusedxml: entity declarations and external entities are refused,
    and so is a document type declaration (unless ``dtd``: XHTML may name its type) and XML
    that is not well formed."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        fromstring(data, forbid_dtd=not dtd, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as e:
        raise DocumentError(
            f"{where}: refused: the XML {_what(e)} (entity expansion and external entities "
            "are never read)"
        ) from None
    except ParseError as e:
        raise DocumentError(f"{where}: not well-formed XML ({e})") from None


def _what(error: Exception) -> str:
    name = type(error).__name__
    return {
        "EntitiesForbidden": "declares entities",
        "ExternalReferenceForbidden": "refers to an external entity",
        "DTDForbidden": "has a DTD",
        "NotSupportedError": "uses a feature that is not supported",
    }.get(name, f"is refused ({name})")


OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # a compound file: .doc, .ppt, encrypted OOXML


def open_archive(
    data: bytes, name: str, limits: Limits, kind: str, dtd: bool = False
) -> dict[str, bytes]:
    """Check the zip archive ``data`` (``kind``: what it should be, for the messages) and
    return its members' inflated bytes by name, every one read within the limits; ``dtd``:
    whether its XML may declare a document type (XHTML's, never an entity)."""
    check_size(data, name, limits)
    if data.startswith(OLE):
        raise DocumentError(
            f"{name}: not a {kind}: an OLE compound file, as Office writes a password-protected "
            "(encrypted) document or an old .doc / .ppt: save it unencrypted in the format "
            "its name says"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise DocumentError(
            f"{name}: not a {kind} (not a zip archive, or a damaged one: {e})"
        ) from None
    except (OSError, ValueError, EOFError) as e:  # a truncated or garbled central directory
        raise DocumentError(f"{name}: a damaged {kind} ({type(e).__name__}: {e})") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > limits.max_members:
            raise DocumentError(
                f"{name}: {len(infos)} archive members; at most {limits.max_members}"
            )
        seen: set[str] = set()
        members: dict[str, bytes] = {}
        total = 0
        for info in infos:
            where = f"{name}: member {info.filename!r}"
            why = _unsafe_name(info.filename)
            if why:
                raise DocumentError(f"{where}: refused: its name {why}")
            if info.filename in seen:
                raise DocumentError(f"{where}: refused: the name appears twice in the archive")
            seen.add(info.filename)
            if info.flag_bits & 0x1:
                raise DocumentError(
                    f"{where}: encrypted (a password-protected {kind}): save it without a password"
                )
            if info.is_dir():
                continue
            parts, size = [], 0
            try:
                with archive.open(info) as stream:
                    while chunk := stream.read(CHUNK):
                        size += len(chunk)
                        if total + size > limits.max_inflated:
                            raise DocumentError(
                                f"{where}: the archive inflates past {limits.max_inflated} "
                                "bytes (a zip bomb, or a document too large)"
                            )
                        parts.append(chunk)
            except DocumentError:
                raise
            except NotImplementedError as e:
                raise DocumentError(f"{where}: {e}") from None
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as e:
                raise DocumentError(
                    f"{where}: damaged or truncated ({type(e).__name__}: {e})"
                ) from None
            total += size
            members[info.filename] = b"".join(parts)
            if info.filename.lower().endswith(XML_ENDINGS):
                check_xml(members[info.filename], where, dtd)
    return members


def require(members: dict[str, bytes], name: str, kind: str, *paths: str) -> None:
    """Refuse an archive that lacks any of ``paths`` (another kind of zip, mislabelled)."""
    for path in paths:
        if path not in members:
            raise DocumentError(f"{name}: not a {kind}: the archive has no {path}")


def require_mimetype(members: dict[str, bytes], name: str, kind: str, want: str) -> None:
    """An OpenDocument or EPUB archive names its type in its ``mimetype`` member."""
    got = members.get("mimetype", b"").decode("ascii", "replace").strip()
    if got != want:
        shown = repr(got) if got else "none"
        raise DocumentError(f"{name}: not a {kind}: its mimetype is {shown}, not {want!r}")
