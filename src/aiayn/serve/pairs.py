"""Language pairs: the translators a server holds, keyed by (source, target), and the route
from one language to another: a pair served directly, or two pairs chained through a third
language (Argos Translate's pivot: de -> fr as de -> en, then en -> fr, where no model
translates de -> fr). A pivot is a composition of two registry entries, each loaded, batched
and unloaded as itself; no model of its own.

Argos Translate chains its installed pairs (``argostranslate.translate``'s
``CompositeTranslation``) and LibreTranslate lists every language so reachable among a
source's targets; here one pivot at most (two models in a row), English first where it joins
the two languages (Argos packages pivot through English), else the first language served (in
the order the models were given) that does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from aiayn.serve.errors import ServeError
from aiayn.serve.inputs import LANGUAGE_NAMES

PIVOT_FIRST = "en"  # the pivot language tried first


@dataclass(frozen=True)
class Route:
    """How ``source`` becomes ``target``: the names of the models translating it, in order
    (one for a pair served directly; two through ``pivot``)."""

    source: str
    target: str
    legs: tuple[str, ...]
    pivot: str | None = None

    @property
    def languages(self) -> tuple[str, str]:
        return (self.source, self.target)


class Pairs:
    """Every route between the languages of ``served`` ((model name, (source, target)), in
    the order the models were given; the first model of a pair serves it), computed once.
    ``names``: languages' names the models give (an Argos Translate package's metadata),
    before aiayn's own table (``name``)."""

    def __init__(
        self, served: Iterable[tuple[str, Sequence[str]]], names: Mapping[str, str] | None = None
    ) -> None:
        self.names = dict(names or {})
        self.direct: dict[tuple[str, str], str] = {}
        codes: list[str] = []
        for name, (source, target) in served:
            self.direct.setdefault((source, target), name)
            codes += [source, target]
        self.codes = list(dict.fromkeys(codes))  # every language, in order of appearance
        pivots = sorted(self.codes, key=lambda code: code != PIVOT_FIRST)  # stable: en first
        self.routes: dict[tuple[str, str], Route] = {
            pair: Route(*pair, (name,)) for pair, name in self.direct.items() if pair[0] != pair[1]
        }
        for source in self.codes:
            for target in self.codes:
                if source == target or (source, target) in self.routes:
                    continue
                for pivot in pivots:
                    first, second = (source, pivot), (pivot, target)
                    if pivot not in (source, target) and first in self.direct:
                        if second in self.direct:
                            legs = (self.direct[first], self.direct[second])
                            self.routes[source, target] = Route(source, target, legs, pivot)
                            break

    def name(self, code: str) -> str:
        """The language's name: a model's own (``names``), else aiayn's table's, else the
        code."""
        return self.names.get(code) or LANGUAGE_NAMES.get(code, code)

    def route(self, source: str, target: str) -> Route | None:
        """The route from ``source`` to ``target`` (None: none; a language to itself is no
        route: its text comes back as it is)."""
        return self.routes.get((source, target))

    def targets(self, source: str) -> list[str]:
        """What ``source`` translates into, itself first (LibreTranslate's ``/languages``:
        a text into its own language comes back as it is), then directly or through a
        pivot, in the order of ``codes``."""
        return [source, *(t for t in self.codes if (source, t) in self.routes)]

    def sources(self, target: str, direct: bool = False) -> list[str]:
        """The languages with a route into ``target`` (``direct``: a pair served directly)."""
        routes = self.direct if direct else self.routes
        return [s for s in self.codes if s != target and (s, target) in routes]


def pick_route(registry, source: str, target: str) -> Route:
    """The route translating ``source`` into ``target``, once the registry is ready;
    LibreTranslate's answers for a language not served and a pair not served (400).
    ``source`` 'auto' stands for a text no language was found in (``aiayn.serve.detect``
    finds the others'): the one source language that translates directly into ``target``,
    else the one through a pivot."""
    registry.require_ready()
    pairs: Pairs = registry.pairs
    for code in (source, target):
        if code not in pairs.codes and not (code == source == "auto"):
            raise ServeError(
                400, f"{code} is not supported", "source" if code == source else "target"
            )
    route = None
    if source == "auto":
        sources = pairs.sources(target, direct=True) or pairs.sources(target)
        if len(sources) > 1:
            raise ServeError(
                400,
                f"source: 'auto' cannot choose among {', '.join(sources)} (no language "
                "was found in the text); name the source",
                "source",
            )
        route = pairs.route(sources[0], target) if sources else None
    else:
        route = pairs.route(source, target)
    if route is None:
        raise ServeError(
            400,
            f"{pairs.name(target)} ({target}) is not available as a target language from "
            f"{pairs.name(source)} ({source})",
            "target",
        )
    return route


def check_glossary_route(route: Route, given) -> None:
    """A request's own glossary holds source terms and their targets: it applies to a pair a
    model translates directly, not to a pivot's two (the server's ``--glossary`` applies to
    each of them, by its own pair)."""
    if given and route.pivot is not None:
        raise ServeError(
            400,
            f"glossary: {route.source} -> {route.target} is translated through "
            f"{route.pivot} (no model translates it directly); a request's glossary applies "
            "to a pair served directly",
            "glossary",
        )


Hypotheses = list[tuple[str, float]]  # (text, score), best first


def pivoted(first: list[Hypotheses], second: list[Hypotheses], n: int) -> list[Hypotheses]:
    """Each text's n-best through a pivot, as Argos Translate's ``CompositeTranslation``
    combines them: ``first[i]``, text i's hypotheses in the pivot language, each translated
    again into its ``second`` hypotheses (``second`` holds them for every first hypothesis,
    in order), scored by the sum of the two scores, best first, repeats dropped, the best
    ``n`` kept. With ``n`` 1 that is the best translation of the best pivot text."""
    out, at = [], 0
    for hypotheses in first:
        candidates = []
        for _, score in hypotheses:
            candidates += [(text, score + more) for text, more in second[at]]
            at += 1
        if n > 1:  # scores rank them (greedy search leaves them unscored: n is 1 there)
            candidates.sort(key=lambda c: -c[1] if not math.isnan(c[1]) else math.inf)
        seen: set[str] = set()
        unique = [c for c in candidates if not (c[0] in seen or seen.add(c[0]))]
        out.append(unique[:n])
    if at != len(second):
        raise ValueError(f"{len(second)} second hypotheses lists for {at} first hypotheses")
    return out
