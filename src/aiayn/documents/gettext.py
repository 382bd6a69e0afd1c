"""Gettext catalogues (.po, .pot) read and written with ``polib``.

Every message not yet translated (an empty ``msgstr``) or marked fuzzy gets a machine
translation and the ``fuzzy`` flag, as a translator expects of a suggestion to review (msgfmt
leaves fuzzy messages out of the compiled catalogue until a person clears the flag);
messages a person translated are kept as they are. A plural message fills every form the
catalogue's ``Plural-Forms`` header counts (two without one): the first from ``msgid``, the
others from ``msgid_plural``. Placeholders (``%s``, ``%(name)s``, ``%d``, ``%%``,
``{name}``, ``{0}``) and markup tags (``<b>``, ``<a href="...">``, ``</a>``) are never shown
to the model: each is a point in the sentence, written back whole where the words around it
went; so is a line break inside a message, and a message's leading and trailing white space
and line breaks are kept (msgfmt checks them). The catalogue is written back in UTF-8, its
header's charset saying so.
"""

from __future__ import annotations

import os
import re
from xml.etree import ElementTree

from aiayn.data.markup import Document
from aiayn.data.passages import edges
from aiayn.documents.base import DocumentError, Limits
from aiayn.documents.safety import check_size, decode_text

# (no two parts may take the same characters, "0" a flag and a width's first digit, ":" in a
# field name and a format spec: a message of such characters would be read in time growing
# with its square)
PLACEHOLDER = re.compile(
    r"%(?:\([^()\s]+\)|\d+\$)?[#0\- +]*(?:[1-9]\d*|\*)?(?:\.(?:\d+|\*))?[hlLqjzt]*"
    r"[diouxXeEfFgGcrsa%]|\{[A-Za-z_0-9]*(?:[.\[][^{}\s:]*)?(?:![rsa])?(?::[^{}]*)?\}"
)
# markup a message holds (``<b>``, ``</a>``, ``<a href="...">``, ``<br/>``): kept whole, never
# shown to the model, as placeholders are; and its line breaks, kept where the words went
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9:_-]*(?:\s[^<>]*)?/?>")
_POINT = re.compile(f"{PLACEHOLDER.pattern}|{_TAG.pattern}|\n")
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
    """``text`` as a block whose placeholders are untranslated points (``<code>``), its line
    breaks ``<br>``, and its markup a pair of tags around words (``<b>Fett</b>``) an inline
    element (``<span>``, the tags its ``open`` and ``close``) or, a tag without its pair, a
    point too."""
    tokens = list(_POINT.finditer(text))
    pairs: dict[int, int] = {}  # an opening tag's token: its closing tag's
    open_tags: list[tuple[str, int]] = []
    for k, match in enumerate(tokens):
        tag = _TAG.fullmatch(match.group())
        if tag is None or match.group().endswith("/>"):
            continue
        name = re.match(r"</?([^\s/>]+)", match.group()).group(1).lower()
        if not match.group().startswith("</"):
            open_tags.append((name, k))
        elif open_tags and open_tags[-1][0] == name:
            pairs[open_tags.pop()[1]] = k
    closing = {k: opening for opening, k in pairs.items()}
    root = ElementTree.Element("p")
    stack, last = [root], None  # the elements open; the last child of the innermost

    def add(words: str) -> None:
        if last is None:
            stack[-1].text = (stack[-1].text or "") + words
        else:
            last.tail = (last.tail or "") + words

    at = 0
    for k, match in enumerate(tokens):
        add(text[at : match.start()])
        at = match.end()
        if k in pairs:
            span = ElementTree.SubElement(stack[-1], "span")
            span.set("open", match.group())
            span.set("close", tokens[pairs[k]].group())
            stack.append(span)
            last = None
        elif k in closing:
            last = stack.pop()
        elif match.group() == "\n":
            last = ElementTree.SubElement(stack[-1], "br")
        else:
            last = ElementTree.SubElement(stack[-1], "code")
            last.text = match.group()
    add(text[at:])
    return root


class _Message:
    """One text of a message (msgid or msgid_plural), its edges kept apart; ``flags``: the
    entry's, whose format flags say how a literal ``%`` or brace of the model's words is
    written (``%%``, ``{{``)."""

    def __init__(self, text: str, flags: list[str]) -> None:
        self.lead, body, self.trail = edges(text)
        self.document = Document(placeholder_tree(body)) if body else None
        # placeholders the source writes against a punctuation mark ("%(name)s,")
        self._tight = {m.group() for m in PLACEHOLDER.finditer(body) if _PUNCT.match(body, m.end())}
        self._escapes = [(old, new) for flag, old, new in _ESCAPES if flag in flags]

    def translation(self) -> str:
        if self.document is None:
            return self.lead + self.trail
        parts: list[tuple[bool, str]] = []  # (words of the model, text)
        _flatten(self.document.root, parts)
        out = []
        for k, (words, part) in enumerate(parts):
            if words:  # one space between words; none at a line break
                part = self._escaped(re.sub(r"\s+", " ", part))
                if k == 0 or parts[k - 1][1] == "\n":
                    part = part.lstrip(" ")
                if k + 1 == len(parts) or parts[k + 1][1] == "\n":
                    part = part.rstrip(" ")
            out.append(part)
        body = "".join(out)
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

    def mark_language(self, code: str) -> None:
        """A catalogue that names no language (a template, .pot) names the translation's."""
        if not self._catalogue.metadata.get("Language", "").strip():
            self._catalogue.metadata["Language"] = code

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


def _flatten(element: ElementTree.Element, parts: list[tuple[bool, str]]) -> None:
    """The written tree ``element`` as text: (whether the model wrote it, the text)."""
    parts.append((True, element.text or ""))
    for child in element:
        if child.tag == "br":
            parts.append((False, "\n"))
        elif child.tag == "span":
            parts.append((False, child.get("open")))
            _flatten(child, parts)
            parts.append((False, child.get("close")))
        else:
            parts.append((False, child.text or ""))
        parts.append((True, child.tail or ""))
