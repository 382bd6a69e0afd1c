"""Which elements are inline, void or never translated, and what each means for the words
around it: the rules every other part of ``aiayn.data.markup`` reads."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Tags:
    """What a caller says of its tags, over the rules above (DeepL's ``tag_handling`` options):
    elements named in ``splitting`` always break the sentence, those in ``non_splitting`` never
    do, those in ``ignored`` are never translated (kept whole, a point in the sentence). With
    ``xml`` the elements are the caller's own, with no HTML meaning: each is inline, unless
    ``outline`` finds it is structure (it stands among other elements with no text of its
    container beside it: one paragraph of a list of them). Names are compared in lower case."""

    splitting: frozenset[str] = frozenset()
    non_splitting: frozenset[str] = frozenset()
    ignored: frozenset[str] = frozenset()
    xml: bool = False
    outline: bool = True


HTML = Tags()  # the HTML rules alone


def name(element) -> str | None:
    """The element's tag name without its namespace (XHTML's, SVG's); None for a comment, a
    processing instruction or a doctype."""
    tag = element.tag
    if not isinstance(tag, str) or tag.startswith("<!"):
        return None
    return tag.rsplit("}", 1)[-1].lower()


def untranslated(element, tags: Tags = HTML) -> bool:
    tag = name(element)
    if tags.xml:  # the caller's own elements: only those it names
        return tag in tags.ignored
    classes = (element.get("class") or "").split()
    return (
        tag in UNTRANSLATED
        or tag in tags.ignored
        or (element.get("translate") or "").strip().lower() == "no"
        or "notranslate" in classes
    )


def is_block(element, memo: dict, tags: Tags = HTML, beside_text: bool = True) -> bool:
    """Whether ``element`` breaks the sentence around it: not phrasing, or an inline element
    that holds a block (``<a><p>...</p></a>``); what ``tags`` says first. ``beside_text``:
    whether its container has text of its own beside its elements (``Tags.outline``)."""
    if tags.xml:
        tag = name(element)
        if tag is None or tag in tags.ignored or tag in tags.non_splitting:
            return False
        return (tags.outline and not beside_text) or _splits(element, memo, tags)
    key = id(element)
    if key not in memo:
        tag = name(element)
        if tag is None or tag in tags.ignored or tag in tags.non_splitting:
            memo[key] = False
        elif tag in tags.splitting:
            memo[key] = True
        elif tag in INLINE:
            memo[key] = not untranslated(element, tags) and any(
                is_block(child, memo, tags) for child in element
            )
        else:
            memo[key] = tag not in VOID and tag not in UNTRANSLATED - {"pre"}
    return memo[key]


def _splits(element, memo: dict, tags: Tags) -> bool:
    """Whether an XML element is, or holds, one of ``tags.splitting`` (outside what is never
    translated)."""
    key = id(element)
    if key not in memo:
        tag = name(element)
        memo[key] = (
            tag is not None
            and tag not in tags.ignored
            and (tag in tags.splitting or any(_splits(child, memo, tags) for child in element))
        )
    return memo[key]


def own_text(element) -> bool:
    """Whether ``element`` holds text of its own, outside its child elements."""
    return bool((element.text or "").strip()) or any((c.tail or "").strip() for c in element)


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
