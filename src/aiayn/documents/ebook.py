"""E-books (.epub) read and written with ebooklib.

Every XHTML document of the book (its chapters, the navigation document, a cover page) is
translated as HTML is (its body and its title), by ``aiayn.data.markup``: inline markup around the words translated
from its own, every element and attribute kept; it is read as XML by lxml without entities,
DTDs or the network, and written back whole, its head (title, stylesheets) included
(ebooklib would rebuild a chapter from its template, keeping the body's children alone, and
the navigation document from the table of contents, its landmarks lost). The table of
contents (its titles, nested sections included) is translated too: ebooklib writes the NCX
from it.
"""

from __future__ import annotations

import io
import re

from aiayn.data.markup import Document
from aiayn.documents.base import DocumentError, Limits, leaf, tree_text
from aiayn.documents.html import declare_utf8, mark_language
from aiayn.documents.safety import open_archive, require_mimetype


def _parser():
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


class EbookDocument:
    def __init__(self, data: bytes, name: str, folder: str = "") -> None:
        import ebooklib
        from ebooklib import epub
        from lxml import etree

        self._book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": False})
        self._book.FOLDER_NAME = folder or "EPUB"  # the package's folder, as it was
        self._name = name
        self._chapters = []  # (item, its tree, the tree's body as a Document)
        self._heads = []  # each chapter's <title>
        for item in self._book.get_items_of_type(ebooklib.ITEM_DOCUMENT):
            try:
                # its bytes as read (``get_content`` would give ebooklib's rebuilt page)
                tree = etree.fromstring(item.content, _parser()).getroottree()
            except etree.XMLSyntaxError as e:
                raise DocumentError(
                    f"{name}: {item.file_name}: not well-formed XHTML ({e})"
                ) from None
            body = next(tree.getroot().iter("{*}body"), None)
            if body is not None:
                self._chapters.append((item, tree, Document(body)))
                head = next(tree.getroot().iter("{*}head"), None)
                title = None if head is None else next(head.iter("{*}title"), None)
                if title is not None:  # what a reader shows above the chapter
                    self._heads.append(Document(title))
        self._titles = []  # (entry of the table of contents, its title's tree)
        self._collect(self._book.toc)
        self.documents = [
            *(d for _, _, d in self._chapters),
            *self._heads,
            *(d for _, d in self._titles),
        ]

    def _collect(self, entries) -> None:
        for entry in entries:
            if isinstance(entry, tuple | list):  # (section, its children)
                self._collect(entry)
            elif getattr(entry, "title", None):
                self._titles.append((entry, Document(leaf(entry.title))))

    def mark_language(self, code: str) -> None:
        """Declare ``code`` the book's language: its package's and every XHTML document's."""
        from ebooklib.epub import NAMESPACES

        self._book.language = code
        described = self._book.metadata.setdefault(NAMESPACES["DC"], {})
        first = (described.get("language") or [(code, {})])[0]
        described["language"] = [(code, first[1])]  # the one it declared, its id kept
        for _, tree, _ in self._chapters:
            mark_language(tree.getroot(), code)

    def save(self) -> bytes:
        from ebooklib import epub
        from lxml import etree

        for item, tree, _ in self._chapters:
            declare_utf8(tree.getroot())
            content = etree.tostring(tree, encoding="utf-8", xml_declaration=True)
            at = self._book.items.index(item)
            self._book.items[at] = _written(item, content)
        for entry, document in self._titles:
            entry.title = tree_text(document.root)
        out = io.BytesIO()
        epub.write_epub(out, self._book, {})
        return _normalized(out.getvalue(), self._name)


def _normalized(data: bytes, name: str) -> bytes:
    """The archive ebooklib wrote, each member's name normalized: an item the package names
    as "../css/style.css" is written as "OEBPS/../css/style.css", a name that climbs out of
    a folder (and that this reader, as others, refuses): "css/style.css", where it was."""
    import posixpath
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            member = posixpath.normpath(info.filename)
            if member.startswith(("../", "/")) or member == "..":
                raise DocumentError(f"{name}: an item lies outside the book: {info.filename}")
            content = source.read(info)
            info.filename = member
            target.writestr(info, content)
    return out.getvalue()


def _written(item, content: bytes):
    """An XHTML ``item`` as ebooklib writes ``content``: as it is (a plain item: ebooklib
    writes an ``EpubHtml``'s body into its template, and an ``EpubNav`` from the table of
    contents), its manifest entry the same."""
    from ebooklib import epub

    plain = epub.EpubItem(
        uid=item.id, file_name=item.file_name, media_type=item.media_type, content=content
    )
    properties = list(getattr(item, "properties", None) or [])
    if isinstance(item, epub.EpubNav) and "nav" not in properties:
        properties.append("nav")
    plain.properties = properties
    for attribute in ("media_overlay", "media_duration"):
        if getattr(item, attribute, None) is not None:
            setattr(plain, attribute, getattr(item, attribute))
    plain.is_linear = item.is_linear
    plain.book = item.book
    return plain


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
        return EbookDocument(data, name, _package_folder(members))


def _package_folder(members: dict[str, bytes]) -> str:
    """The folder of the package document (``OEBPS`` for ``OEBPS/content.opf``), as the
    container names it ("": none, or at the top)."""
    import posixpath

    from lxml import etree

    container = members.get("META-INF/container.xml")
    if container is None:
        return ""
    root = etree.fromstring(container, _parser())
    rootfile = next(root.iter("{*}rootfile"), None)
    path = (rootfile.get("full-path") or "") if rootfile is not None else ""
    folder = posixpath.dirname(posixpath.normpath(path)) if path else ""
    return "" if folder in (".", "..") or folder.startswith("../") else folder
