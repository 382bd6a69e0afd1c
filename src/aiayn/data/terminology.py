"""Terms a translation must use: glossaries and spans kept verbatim (placeholders).

A glossary maps source terms to target terms per language pair. It is read from JSON in
LibreTranslate's layout, ``{"de_en": {"Schraube": "bolt"}}``, or from TSV whose first line
names the languages of its columns (``de<TAB>en``; every later line one term in each; ``#``
starts a comment line). A source term found in a text (ignoring case, on word boundaries,
the longest first where two overlap) makes its target a constraint on that text's
translation, one per occurrence (``Terms.find``): the search places it
(``aiayn.infer.constrained``). Nothing rewrites the text afterwards, so a term never mangles
a word that contains it ("Land" -> "country" leaves "Switzerland" alone).

Placeholders (``%s``, ``%(name)s``, ``{name}``, ``{0}``, ``$VAR``, ``<x/>``: ``PLACEHOLDERS``,
a list of regular expressions a caller may extend) found in a text are constraints copied
from the source: each is kept verbatim, once per occurrence.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.errors import UserError

# Placeholders of format strings and templates: printf (%s, %d, %ld, %1$s, %(name)s, %@),
# Ruby's %{name}, Python's str.format ({}, {0}, {name}, {0:.2f}, {user.name}) and ICU's
# {count, number}, Mustache/Jinja ({{name}}, {{{raw}}}, {% tag %}), shell and template
# variables ($VAR, ${VAR}), self-closing tags (<x/>, <br id="1"/>); and what is never
# translated: URLs and e-mail addresses (read from where their run of characters begins: tried
# at every word boundary, "a-a-a-..." was read in time growing with its square).
# (a width's first digit is not "0", a flag: a "%" and many zeros would be read in time
# growing with their square)
_PRINTF = r"[-#0+']*(?:[1-9]\d*|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcsp@]"
PLACEHOLDERS: tuple[str, ...] = (
    r"%\(\w+\)" + _PRINTF + r"|%\{\w+\}",
    r"%(?:\d+\$)?" + _PRINTF + r"(?!\w)",
    r"\{\w*(?:\.\w+|\[\w+\])*(?:[!:][^{}\s]*)?\}|\{\w+,\s*\w+(?:,\s*\w+)?\}",
    r"\{\{\{[^{}]*\}\}\}|\{\{[^{}]*\}\}|\{%[^{}]*%\}",
    r"\$\{[A-Za-z_]\w*\}|\$[A-Za-z_]\w*",
    r"<[A-Za-z][\w:.-]*(?:\s[^<>]*)?/>",
    r"\b(?:https?://|ftp://|www\.)[^\s<>\"'{}]*[^\s<>\"'{}.,;:!?)\]]",
    r"(?<![\w.+-])\w[\w.+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
)
_PAIR = re.compile(r"^([A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*)_([A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*)$")
_LANG = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$")
MAX_TERMS = 100_000  # per file: a glossary is read whole, every term in one expression


class GlossaryError(UserError):
    """A glossary that cannot be read: the message names the file and line or field."""


@dataclass(frozen=True)
class Glossary:
    """Terms per language pair: ``pairs[(source, target)]`` maps a source term (as written)
    to its target term. ``name`` is what errors call it (a file name)."""

    pairs: Mapping[tuple[str, str], Mapping[str, str]]
    name: str = "glossary"
    # pair -> why its terms cannot be used (one source term with two targets)
    conflicts: Mapping[tuple[str, str], str] = field(default_factory=dict)
    _made: dict = field(default_factory=dict, compare=False, repr=False)  # pair -> Terms

    @classmethod
    def read(cls, path: Path | str) -> Glossary:
        """A glossary file: JSON (LibreTranslate's layout) or TSV, told apart by the name's
        ending (``.json``; ``.tsv``, ``.tab``, ``.txt``), else by the first character."""
        path = Path(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise GlossaryError(f"{path}: no such glossary file") from None
        except OSError as e:
            raise GlossaryError(f"{path}: cannot read the glossary ({e.strerror})") from None
        try:
            text = data.decode("utf-8-sig")  # a byte order mark (spreadsheets write one) is no term
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise GlossaryError(
                f"{path}: line {line}: not UTF-8 text ({e.reason} at byte {e.start}); save the "
                "glossary as UTF-8"
            ) from None
        suffix = path.suffix.lower()
        if suffix in (".tbx", ".xml", ".csv") or text.lstrip()[:1] == "<":
            raise GlossaryError(
                f"{path}: a glossary is JSON in LibreTranslate's layout or TSV (tab-separated, "
                "its first line naming the languages: de<TAB>en); "
                f"{'CSV' if suffix == '.csv' else 'TBX/XML'} is not read: save it as TSV"
            )
        if suffix == ".json" or (
            suffix not in (".tsv", ".tab", ".txt") and text.lstrip()[:1] in "{["
        ):
            return cls.from_json(text, str(path))
        return cls.from_tsv(text, str(path))

    @classmethod
    def from_json(cls, text: str, name: str = "glossary") -> Glossary:
        try:
            data = json.loads(text, object_pairs_hook=functools.partial(_one_each, name))
        except json.JSONDecodeError as e:
            raise GlossaryError(
                f"{name}: line {e.lineno}, column {e.colno}: not JSON ({e.msg})"
            ) from None
        return cls.from_mapping(data, name)

    @classmethod
    def from_mapping(cls, data, name: str = "glossary") -> Glossary:
        """``{"de_en": {"Schraube": "bolt"}, ...}`` (LibreTranslate's layout)."""
        if not isinstance(data, Mapping):
            raise GlossaryError(
                f'{name}: must be an object of language pairs, e.g. {{"de_en": {{"Schraube": '
                f'"bolt"}}}}, got {type(data).__name__}'
            )
        pairs: dict[tuple[str, str], dict[str, str]] = {}
        keys: dict[tuple[str, str], dict[str, str]] = {}
        count = 0
        for key, terms in data.items():
            match = _PAIR.match(key) if isinstance(key, str) else None
            if match is None:
                raise GlossaryError(
                    f'{name}: "{key}": a language pair is written source_target, e.g. "de_en"'
                )
            table = term_table(terms, f'{name}: "{key}"')  # the checks a request's get
            pair = (match.group(1).lower(), match.group(2).lower())
            into, index = pairs.setdefault(pair, {}), keys.setdefault(pair, {})
            for source, target in table.items():
                _add(into, index, source, target, f'{name}: "{key}"')
            count += len(table)
            if count > MAX_TERMS:
                raise GlossaryError(f"{name}: more than {MAX_TERMS} terms")
        return cls(pairs, name)

    @classmethod
    def from_tsv(cls, text: str, name: str = "glossary") -> Glossary:
        """Tab-separated terms, one a line, as written: a quote is part of a term (no CSV
        quoting, so a line is always one entry and errors name the line as an editor
        shows it); trailing empty columns (a spreadsheet's) are ignored."""
        rows = [
            (n, line.split("\t"))
            for n, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
        if not rows:
            raise GlossaryError(f"{name}: no terms (the first line names the languages: de\\ten)")
        line, header = rows[0]
        while len(header) > 2 and not header[-1].strip():
            header = header[:-1]
        langs = [c.strip().lower() for c in header]
        if len(langs) < 2 or not all(_LANG.match(c) for c in langs) or len(set(langs)) < len(langs):
            raise GlossaryError(
                f"{name}: line {line}: the first line names the languages of the columns, two or "
                f"more different codes separated by tabs (e.g. de<TAB>en), got {header!r}"
            )
        if len(rows) - 1 > MAX_TERMS:
            raise GlossaryError(f"{name}: more than {MAX_TERMS} terms")
        pairs: dict[tuple[str, str], dict[str, str]] = {}
        keys: dict[tuple[str, str], dict[str, str]] = {}
        conflicts: dict[tuple[str, str], str] = {}
        for line, row in rows[1:]:
            while len(row) > len(langs) and not row[-1].strip():
                row = row[:-1]
            if len(row) != len(langs):
                raise GlossaryError(
                    f"{name}: line {line}: {len(row)} columns; the first line names {len(langs)}"
                )
            cells = [_term(c, f"{name}: line {line}, column {i + 1}") for i, c in enumerate(row)]
            for i, src in enumerate(langs):
                for j, tgt in enumerate(langs):
                    if i == j:
                        continue
                    into, index = pairs.setdefault((src, tgt), {}), keys.setdefault((src, tgt), {})
                    try:
                        _add(into, index, cells[i], cells[j], f"{name}: line {line}")
                    except GlossaryError as e:
                        # a pair no model asks for may map two terms to one (bolt <- Schraube,
                        # Bolzen): an error only where that pair is used (``terms``)
                        conflicts.setdefault((src, tgt), f"{e} ({src}_{tgt})")
        return cls(pairs, name, conflicts)

    def terms(self, source: str, target: str) -> Terms:
        """The terms from ``source`` to ``target``; an error if the glossary has none. Made
        once a pair (a large glossary's expression is not compiled per request)."""
        key = (source.lower(), target.lower())
        if key in self._made:
            return self._made[key]
        table = self.table(source, target)
        terms = self._made[key] = Terms(table)
        return terms

    def table(self, source: str, target: str) -> Mapping[str, str]:
        """``{source term: target term}`` from ``source`` to ``target``; an error if the
        glossary has none, or gives one source term two targets."""
        key = (source.lower(), target.lower())
        if key in self.conflicts:
            raise GlossaryError(self.conflicts[key])
        table = self.pairs.get(key)
        if table is None:
            have = ", ".join(f"{s}_{t}" for s, t in sorted(self.pairs)) or "none"
            raise GlossaryError(
                f"{self.name}: no terms for {source}_{target} (the model's languages); it has: "
                f"{have}"
            )
        return table


def term_table(terms: Mapping, where: str) -> dict[str, str]:
    """``{source term: target term}`` checked: non-empty strings (``where`` names it)."""
    if not isinstance(terms, Mapping):
        raise GlossaryError(
            f'{where}: must be an object of terms, e.g. {{"Schraube": "bolt"}}, got '
            f"{type(terms).__name__}"
        )
    table: dict[str, str] = {}
    keys: dict[str, str] = {}
    for source, target in terms.items():
        _add(
            table,
            keys,
            _term(source, f"{where}: a source term"),
            _term(target, f'{where} -> "{source}"'),
            where,
        )
    return table


def term_key(term: str) -> str:
    """What a source term is matched as: composed (NFC: "a" + U+0308 is "ä"), lower case,
    its words one space apart (a no-break space, a line break or two spaces between them are
    one), so terms that differ only there are one term."""
    return " ".join(unicodedata.normalize("NFC", term).lower().split())


def _term_pattern(term: str) -> str:
    """The expression of a term: its words, any whitespace between them."""
    return r"\s+".join(re.escape(word) for word in term.split())


def _add(table: dict[str, str], keys: dict[str, str], source: str, target: str, where: str):
    """``table[source] = target``, unless the table gives that term (ignoring case and
    composition; ``keys``: term_key -> the source term as written) another target: an error
    naming both (the same target twice is one)."""
    key = term_key(source)
    other = keys.get(key)
    if other is None:
        keys[key] = source
        table[source] = target
    elif table[other] != target:
        raise GlossaryError(
            f'{where}: "{source}" -> "{target}", but "{other}" -> "{table[other]}" already '
            "(case is ignored): a source term has one target"
        )


def _one_each(name: str, items: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are each written once (a term given twice is an error)."""
    out: dict = {}
    for key, value in items:
        if key in out and out[key] != value:
            raise GlossaryError(f'{name}: "{key}" is given twice in one object, with two values')
        out[key] = value
    return out


def _term(value, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise GlossaryError(f"{where}: a term must be a non-empty string, got {value!r}")
    if any(c in value for c in "\t\n\r"):
        raise GlossaryError(f"{where}: a term holds a tab or a line break: {value!r}")
    if len(value) > 500:
        raise GlossaryError(f"{where}: a term of {len(value)} characters (at most 500)")
    return value.strip()


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    source: str  # as written in the text
    target: str  # what the translation must hold


class Terms:
    """Source terms and their targets, matched in texts ignoring case, composition (NFC) and
    the kind and length of whitespace between a term's words, on word boundaries, the
    longest first."""

    def __init__(self, table: Mapping[str, str]):
        self.targets = {term_key(s): t for s, t in table.items()}
        # matched as written (composed), case folded by the expression: a lower-cased "İ" is
        # two characters ("i" and a dot above) that the text's "İ" is not
        self._written = {term_key(s): unicodedata.normalize("NFC", s) for s in table}
        ordered = sorted(self._written.values(), key=len, reverse=True)
        self.pattern = (
            re.compile(
                r"(?<!\w)(?:" + "|".join(_term_pattern(s) for s in ordered) + r")(?!\w)",
                re.IGNORECASE,
            )
            if ordered
            else None
        )

    def find(self, text: str) -> list[Match]:
        """The terms in ``text`` (NFC: positions are those of its composed form), in order,
        none overlapping."""
        if self.pattern is None:
            return []
        text = unicodedata.normalize("NFC", text)
        return [
            Match(m.start(), m.end(), m.group(), self._target(m.group()))
            for m in self.pattern.finditer(text)
        ]

    def _target(self, found: str) -> str:
        """The target of the term the expression matched as ``found``: a character's lower
        case is not always what the expression's case folding took ("ſ" is an "s"; "İ" an
        "i"), so a miss looks for the term that matches it whole."""
        target = self.targets.get(term_key(found))
        if target is not None:
            return target
        return next(
            self.targets[key]
            for key, s in self._written.items()
            if re.fullmatch(_term_pattern(s), found, re.IGNORECASE)
        )


def placeholders(text: str, patterns: Sequence[str] = PLACEHOLDERS) -> list[Match]:
    """The spans of ``text`` that ``patterns`` (regular expressions) match, in order, none
    overlapping (the earliest first, then the longest); each one's target is itself."""
    found: list[Match] = []
    for pattern in patterns:
        found += [
            Match(m.start(), m.end(), m.group(), m.group())
            for m in re.finditer(pattern, text)
            if m.end() > m.start()
        ]
    found.sort(key=lambda m: (m.start, -m.end))
    out: list[Match] = []
    for m in found:
        if not out or m.start >= out[-1].end:
            out.append(m)
    return out


def check_patterns(patterns: Sequence[str]) -> list[str]:
    """``patterns`` as a list of valid regular expressions (an error names a bad one)."""
    if isinstance(patterns, str):
        raise UserError(f"keep: a list of regular expressions, got the string {patterns!r}")
    out = []
    for p in patterns:
        try:
            re.compile(p)
        except (re.error, TypeError) as e:
            raise UserError(f"keep: {p!r} is not a regular expression ({e})") from None
        out.append(p)
    return out
