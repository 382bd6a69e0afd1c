"""Language detection (bench/detect.py): the detectors that keep to a server's languages, on
short and long texts, against LibreTranslate's langdetect and lexilang."""

from __future__ import annotations

from pathlib import Path

from .common import latest_by, load, num, pct, provenance, table

TITLE = "Language detection"
INTRO = (
    '`bench/detect.py`: what `source: "auto"` and `/detect` answer, each text detected on its '
    "own among the served languages. Texts under 20 characters (where LibreTranslate switches "
    "to lexilang's word lists) and longer ones: Django's translated messages in ten languages "
    "(ten candidates; many are one or two words of an interface, some alike in several "
    "languages), and the test sets of the repository's German-English corpora (candidates "
    "German and English, as the shipped server detects). Each detector runs in a process of "
    "its own: the time a text is taken once its models are loaded; the first call, which "
    "loads them, and the growth of the process's peak memory are given apart."
)


def render(results: Path) -> str:
    parts = []
    for record in latest_by(load(results, "detect"), lambda r: r["per_language"]):
        detectors = record["detectors"]
        runs = next(iter(detectors.values()))["runs"]
        columns = [(r["corpus"], r["length"]) for r in runs]
        texts = {(r["corpus"], r["length"]): r["texts"] for r in runs}
        header = ["detector", *(f"{c}, {length} ({texts[c, length]:,})" for c, length in columns)]
        accuracy = [
            [d["label"]] + [pct(r["accuracy"]) for r in d["runs"]] for d in detectors.values()
        ]
        django = {r["length"]: r for r in runs if r["corpus"] == columns[0][0]}
        cost = [
            [
                d["label"],
                *(num(r["ms_per_text"], 3) for r in d["runs"] if r["corpus"] == columns[0][0]),
                num(d["first_call_s"], 2),
                num(d["peak_rss_added_mb"]),
            ]
            for d in detectors.values()
        ]
        cost_header = [
            "detector",
            *(f"ms a text, {columns[0][0]}, {length}" for length in django),
            "first call, s",
            "memory added, MB",
        ]
        versions = ", ".join(f"{name} {v}" for name, v in record["versions"].items())
        parts.append(
            f"Up to {record['per_language']} texts a language and length, drawn with seed "
            f"{record['seed']}; short: under {record['short_below_chars']} characters "
            f"({versions}):\n\n"
            + provenance(record, "bench/detect.py")
            + "\n\n"
            + table(header, accuracy, set(range(1, len(header))))
            + "\n\n"
            + table(cost_header, cost, set(range(1, len(cost_header))))
        )
    return "\n\n".join(parts)
