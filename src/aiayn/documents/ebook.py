"""E-books (.epub) read and written with ebooklib.

Every chapter (an XHTML document of the spine or the manifest) is translated as HTML is, by
``aiayn.data.markup``: inline markup around the words translated from its own, every element
and attribute kept; it is read as XML by lxml without entities, DTDs or the network. The
table of contents (its titles, nested sections included) is translated too: ebooklib writes
the navigation document and the NCX from it.
"""

from __future__ import annotations

import io
import re

from aiayn.data.markup import Document
from aiayn.documents.base import DocumentError, Limits, leaf, tree_text
from aiayn.documents.safety import open_archive, require_mimetype


def _parser():
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


class EbookDocument:
    def __init__(self, data: bytes, name: str) -> None:
        import ebooklib
        from ebooklib import epub
        from lxml import etree

        self._book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": False})
        self._chapters = []
        for item in self._book.get_items_of_type(ebooklib.ITEM_DOCUMENT):
            if isinstance(item, epub.EpubNav):
                continue  # written from the table of contents
            try:
                tree = etree.fromstring(item.get_content(), _parser()).getroottree()
            except etree.XMLSyntaxError as e:
                raise DocumentError(
                    f"{name}: {item.file_name}: not well-formed XHTML ({e})"
                ) from None
            body = next(tree.getroot().iter("{*}body"), None)
            if body is not None:
                self._chapters.append((item, tree, Document(body)))
        self._titles = []  # (entry of the table of contents, its title's tree)
        self._collect(self._book.toc)
        self.documents = [d for _, _, d in self._chapters] + [d for _, d in self._titles]

    def _collect(self, entries) -> None:
        for entry in entries:
            if isinstance(entry, tuple | list):  # (section, its children)
                self._collect(entry)
            elif getattr(entry, "title", None):
                self._titles.append((entry, Document(leaf(entry.title))))

    def save(self) -> bytes:
        from ebooklib import epub
        from lxml import etree

        for item, tree, _ in self._chapters:
            item.content = etree.tostring(tree, encoding="utf-8", xml_declaration=True)
        for entry, document in self._titles:
            entry.title = tree_text(document.root)
        out = io.BytesIO()
        epub.write_epub(out, self._book, {})
        return out.getvalue()


class Ebook:
    extensions = (".epub",)
    media_type = "application/epub+zip"

    def open(self, data: bytes, name: str, limits: Limits) -> EbookDocument:
        members = open_archive(data, name, limits, ".epub", dtd=True)
        require_mimetype(members, name, ".epub", "application/epub+zip")
        encryption = members.get("META-INF/encryption.xml", b"")
        if re.search(rb"URI=\"[^\"]*\.(x?html?|ncx|opf)\"", encryption):
            raise DocumentError(
                f"{name}: encrypted (its chapters are, by DRM): an e-book without DRM only"
            )
        return EbookDocument(data, name)
