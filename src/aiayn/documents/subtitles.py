"""SubRip subtitles (.srt, UTF-8) read and written with the ``srt`` library: each subtitle's
text one text to translate (its lines joined: a sentence often runs over two), its number
and times kept; the inline tags SubRip players know (``<i>``, ``<b>``, ``<u>``, ``<font>``)
kept around the words aligned to those they held."""

from __future__ import annotations

import html

from aiayn.data.markup import Document, MarkupError, parse, serialize
from aiayn.documents.base import DocumentError, Limits, leaf, tree_text
from aiayn.documents.html import check_depth
from aiayn.documents.safety import check_size, decode_text


class SubtitleDocument:
    def __init__(self, text: str, name: str) -> None:
        import srt

        try:
            self._subtitles = list(srt.parse(text))
        except (srt.SRTParseError, ValueError) as e:
            raise DocumentError(f"{name}: not SubRip subtitles ({e})") from None
        self._units: list[tuple[int, Document, bool]] = []
        for k, subtitle in enumerate(self._subtitles):
            content = subtitle.content.strip()
            if not content:
                continue
            tagged = "<" in content
            if tagged:
                check_depth(content, f"{name}: subtitle {subtitle.index}")
            try:
                document = parse(content, f"{name}: subtitle {subtitle.index}") if tagged else None
            except MarkupError:
                document, tagged = None, False  # a lone "<" is text
            self._units.append((k, document or Document(leaf(content)), tagged))
        self.documents = [d for _, d, _ in self._units]

    def save(self) -> bytes:
        import srt

        for k, document, tagged in self._units:
            # SubRip is not HTML: its "&" is an ampersand
            text = html.unescape(serialize(document.root)) if tagged else tree_text(document.root)
            self._subtitles[k].content = text
        return srt.compose(self._subtitles, reindex=False).encode("utf-8")


class Subtitles:
    extensions = (".srt",)
    media_type = "application/x-subrip; charset=utf-8"

    def open(self, data: bytes, name: str, limits: Limits) -> SubtitleDocument:
        check_size(data, name, limits)
        return SubtitleDocument(decode_text(data, name), name)
