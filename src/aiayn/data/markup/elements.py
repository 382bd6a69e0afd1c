"""Which elements are inline, void or never translated, and what each means for the words
around it: the rules every other part of ``aiayn.data.markup`` reads."""

from __future__ import annotations

# Phrasing elements whose words are translated with the sentence around them.
INLINE = frozenset(
    "a abbr acronym b bdi bdo big button cite data del dfn em font i ins label mark q rb rp "
    "rt rtc ruby s small span strike strong sub sup time tt u".split()
)
# Phrasing elements with no words of their own: a point in the sentence.
VOID = frozenset(
    "area audio br canvas embed iframe img input meter object picture progress source "
    "track video wbr".split()
)
# Elements never translated. Inside a sentence (the phrasing ones) they are a point in it,
# kept whole; elsewhere (the block ones) they are left as they are.
UNTRANSLATED = frozenset(
    "code kbd math noscript pre samp script select style svg template textarea var".split()
)


def name(element) -> str | None:
    """The element's tag name without its namespace (XHTML's, SVG's); None for a comment, a
    processing instruction or a doctype."""
    tag = element.tag
    if not isinstance(tag, str) or tag.startswith("<!"):
        return None
    return tag.rsplit("}", 1)[-1].lower()


def untranslated(element) -> bool:
    classes = (element.get("class") or "").split()
    return (
        name(element) in UNTRANSLATED
        or (element.get("translate") or "").strip().lower() == "no"
        or "notranslate" in classes
    )


def is_block(element, memo: dict) -> bool:
    """Whether ``element`` breaks the sentence around it: not phrasing, or an inline element
    that holds a block (``<a><p>...</p></a>``)."""
    key = id(element)
    if key not in memo:
        tag = name(element)
        if tag is None:
            memo[key] = False
        elif tag in INLINE:
            memo[key] = not untranslated(element) and any(
                is_block(child, memo) for child in element
            )
        else:
            memo[key] = tag not in VOID and tag not in UNTRANSLATED - {"pre"}
    return memo[key]


def breaks(element) -> bool:
    """Whether ``element`` breaks a word it stands in: a void element (a line break, an
    image) or hidden text (one variant of the words next to it)."""
    return name(element) in VOID - {"wbr"} or element.get("hidden") is not None


def unspaced(element) -> bool:
    """Whether the words on either side of ``element`` are written without a space between
    them: a line break, hidden text (one variant of the words next to it)."""
    return name(element) == "br" or element.get("hidden") is not None


def has_text(element) -> bool:
    return bool("".join(element.itertext()).strip()) if name(element) else False
