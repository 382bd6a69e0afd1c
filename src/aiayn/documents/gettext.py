"""Gettext catalogues (.po, .pot) read and written with ``polib``.

Every message not yet translated (an empty ``msgstr``) or marked fuzzy gets a machine
translation and the ``fuzzy`` flag, as a translator expects of a suggestion to review (msgfmt
leaves fuzzy messages out of the compiled catalogue until a person clears the flag);
messages a person translated are kept as they are. A plural message fills every form the
catalogue's ``Plural-Forms`` header counts (two without one): the first from ``msgid``, the
others from ``msgid_plural``. Placeholders (``%s``, ``%(name)s``, ``%d``, ``%%``,
``{name}``, ``{0}``) are never shown to the model: each is a point in the sentence, written
back whole where the words around it went; a message's leading and trailing white space and
line breaks are kept (msgfmt checks them). The catalogue is written back in UTF-8, its
header's charset saying so.
"""

from __future__ import annotations

import os
import re
from xml.etree import ElementTree

from aiayn.data.markup import Document
from aiayn.documents.base import DocumentError, Limits
from aiayn.documents.safety import check_size, decode_text

PLACEHOLDER = re.compile(
    r"%(?:\([^)\s]+\)|\d+\$)?[#0\- +]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[hlLqjzt]*[diouxXeEfFgGcrsa%]"
    r"|\{[A-Za-z_0-9]*(?:[.\[][^{}\s]*)?(?:![rsa])?(?::[^{}]*)?\}"
)
_EDGES = re.compile(r"^(\s*)(.*?)(\s*)$", re.DOTALL)
# (format flag, literal, as written in that format)
_ESCAPES = [
    ("python-format", "%", "%%"),
    ("c-format", "%", "%%"),
    ("python-brace-format", "{", "{{"),
    ("python-brace-format", "}", "}}"),
]
_PUNCT = re.compile(r"[,.;:!?)]")
_NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
_CHARSET = re.compile(r"charset\s*=\s*[^;\s]*", re.IGNORECASE)


def placeholder_tree(text: str) -> ElementTree.Element:
    """``text`` as a block whose placeholders are untranslated points (``<code>``)."""
    root = ElementTree.Element("p")
    root.text = ""
    last: ElementTree.Element | None = None
    at = 0
    for match in PLACEHOLDER.finditer(text):
        if last is None:
            root.text += text[at : match.start()]
        else:
            last.tail = (last.tail or "") + text[at : match.start()]
        last = ElementTree.SubElement(root, "code")
        last.text = match.group()
        at = match.end()
    if last is None:
        root.text += text[at:]
    else:
        last.tail = (last.tail or "") + text[at:]
    return root


class _Message:
    """One text of a message (msgid or msgid_plural), its edges kept apart; ``flags``: the
    entry's, whose format flags say how a literal ``%`` or brace of the model's words is
    written (``%%``, ``{{``)."""

    def __init__(self, text: str, flags: list[str]) -> None:
        self.lead, body, self.trail = _EDGES.match(text).groups()
        self.document = Document(placeholder_tree(body)) if body else None
        # placeholders the source writes against a punctuation mark ("%(name)s,")
        self._tight = {m.group() for m in PLACEHOLDER.finditer(body) if _PUNCT.match(body, m.end())}
        self._escapes = [(old, new) for flag, old, new in _ESCAPES if flag in flags]

    def translation(self) -> str:
        if self.document is None:
            return self.lead + self.trail
        root, parts = self.document.root, []
        parts.append(self._escaped(root.text or ""))
        for point in root:  # a placeholder, whole, then the words after it
            parts.append(point.text or "")
            parts.append(self._escaped(point.tail or ""))
        body = " ".join("".join(parts).split())
        for placeholder in self._tight:  # the space the writer puts after a point, taken out
            body = re.sub(f"({re.escape(placeholder)}) (?=[,.;:!?)])", r"\1", body)
        return self.lead + body + self.trail

    def _escaped(self, words: str) -> str:
        """The model's words as the format writes them: a literal ``%`` is ``%%`` in a
        printf or Python format string, a brace doubled in a brace format."""
        for old, new in self._escapes:
            words = words.replace(old, new)
        return words


class CatalogueDocument:
    def __init__(self, data: bytes, name: str) -> None:
        import polib

        text = decode_text(data, name)
        # polib reads a string that names a file as that file: a catalogue's text always
        # spans lines (msgid, msgstr), and one that names a file here is refused outright
        if "\n" not in text.strip() or _names_a_file(text):
            raise DocumentError(f"{name}: not a gettext catalogue (no msgid and msgstr lines)")
        try:
            self._catalogue = polib.pofile(text, wrapwidth=0)
        except (OSError, ValueError, UnicodeError) as e:
            raise DocumentError(f"{name}: not a gettext catalogue ({e})") from None
        match = _NPLURALS.search(self._catalogue.metadata.get("Plural-Forms", ""))
        self._nplurals = max(1, min(int(match.group(1)), 10)) if match else 2
        self._entries: list[tuple[object, _Message, _Message | None]] = []
        for entry in self._catalogue:
            if entry.obsolete or not entry.msgid:
                continue
            done = entry.msgstr or any(entry.msgstr_plural.values())
            if done and "fuzzy" not in entry.flags:
                continue  # a person's translation
            flags = list(entry.flags)
            plural = _Message(entry.msgid_plural, flags) if entry.msgid_plural else None
            self._entries.append((entry, _Message(entry.msgid, flags), plural))
        self.documents = [
            m.document
            for _, one, plural in self._entries
            for m in (one, plural)
            if m is not None and m.document is not None
        ]

    def save(self) -> bytes:
        for entry, one, plural in self._entries:
            if plural is None:
                entry.msgstr = one.translation()
            else:
                forms = [one.translation()] + [plural.translation()] * (self._nplurals - 1)
                entry.msgstr_plural = dict(enumerate(forms))
            if "fuzzy" not in entry.flags:
                entry.flags.append("fuzzy")
        # written as UTF-8 whatever charset the header declared (one the translation may not
        # fit: ISO-8859-1 has no "—"), the header saying so
        content = self._catalogue.metadata.get("Content-Type")
        if content is not None:
            self._catalogue.metadata["Content-Type"] = (
                _CHARSET.sub("charset=UTF-8", content)
                if _CHARSET.search(content)
                else f"{content.rstrip('; ')}; charset=UTF-8"
            )
        self._catalogue.encoding = "utf-8"
        return self._catalogue.__unicode__().encode("utf-8")


def _names_a_file(text: str) -> bool:
    try:
        return os.path.exists(text)
    except (ValueError, OSError):
        return False


class Gettext:
    extensions = (".po", ".pot")
    media_type = "text/x-gettext-translation; charset=utf-8"

    def open(self, data: bytes, name: str, limits: Limits) -> CatalogueDocument:
        check_size(data, name, limits)
        return CatalogueDocument(data, name)
