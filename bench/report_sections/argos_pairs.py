"""Serving a directory of Argos Translate packages (bench/argos_pairs.py): aiayn serve
--argos-packages against LibreTranslate on the same packages, memory, cold and warm latency,
pivots and detection."""

from __future__ import annotations

from pathlib import Path

from .common import latest, num, pct, provenance, table

TITLE = "Serving Argos Translate packages"
INTRO = (
    "`bench/argos_pairs.py`: one packages directory of three pairs (de->en, en->fr, en->es; "
    "de->fr and de->es pivot through English) served by `aiayn serve --argos-packages DIR` "
    "and by LibreTranslate with `ARGOS_PACKAGES_DIR` set to the same directory, both running "
    "at once on the loopback address, one CTranslate2 thread and Argos Translate's beam (4) "
    "each, over LibreTranslate's `/translate` and `/detect`, asked one request at a time in "
    "turn (the order turned at each request) so that a shared machine's load falls on both "
    "alike. One sentence a request: a pair's first request (cold: loading it included) and "
    "the median of the next ones (warm); resident memory of each server's processes before any "
    "translation and after each pair's first request; a pivot's warm median over the direct "
    "de->en's timed beside it; and `/detect` on `bench/detect.py`'s Django messages in the "
    "four served languages. No request repeats the text of the one before it on a pair: Argos "
    "Translate keeps the previous call's translations and LibreTranslate answers a repeat from "
    "them. The English-source pairs are the German model given English, so their output is "
    "not French or Spanish."
)


def render(results: Path) -> str:
    record = latest(results, "argos_pairs")
    if record is None:
        return ""
    servers = record["servers"]
    names = list(servers)
    label = {"aiayn": "aiayn serve", "libretranslate": "LibreTranslate"}
    peer = record.get("peer") or "not run (see the note)"
    same = record.get("same_output_share")
    lines = [
        f"Packages: {record['packages']}. Peer: {peer}. {record['requests']} warm requests a "
        f"route; `/detect`: {record['detect_per_language']} texts a language and length "
        f"(seed {record['seed']}).",
        "",
        provenance(record, "bench/argos_pairs.py"),
        "",
    ]
    memory = [["ready (started, answering), s", *(num(servers[n]["ready_s"], 2) for n in names)]]
    memory.append(["RSS, no pair loaded, MB", *(num(servers[n]["rss_mb_no_pair"]) for n in names)])
    for pair in record["pairs"]:
        memory.append(
            [f"RSS after {pair} loaded, MB"]
            + [num(servers[n]["pairs"][pair]["rss_mb_after"]) for n in names]
        )
    memory.append(["RSS after `/detect` too, MB", *(num(servers[n]["rss_mb_end"]) for n in names)])
    lines += [table(["", *(label[n] for n in names)], memory, set(range(1, len(names) + 1))), ""]
    header = ["route"]
    for n in names:
        header += [f"{label[n]}: first, ms", f"{label[n]}: warm, ms"]
    rows = []
    for pair in record["pairs"]:
        row = [pair]
        for n in names:
            figures = servers[n]["pairs"][pair]
            row += [num(1000 * figures["cold_s"]), num(1000 * figures["warm_median_s"], 1)]
        rows.append(row)
    beside = "direct_de_en_beside_pivots_median_s"
    rows.append(
        ["de-en, beside the pivots"]
        + [x for n in names for x in ("", num(1000 * servers[n][beside], 1))]
    )
    for pivot in record["pivots"]:
        row = [f"{pivot} (pivot)"]
        for n in names:
            figures = servers[n]["pivots"][pivot]
            row += [
                num(1000 * figures["first_s"]),
                f"{num(1000 * figures['warm_median_s'], 1)} "
                f"({figures['over_direct_de_en']:.2f}x de-en beside)",
            ]
        rows.append(row)
    lines += [table(header, rows, set(range(1, len(header)))), ""]
    detect = [
        [f"`/detect` accuracy, {length} ({count} texts)"]
        + [pct(servers[n]["detect_accuracy"][length]) for n in names]
        for length, count in record["detect_texts"].items()
    ]
    lines.append(table(["", *(label[n] for n in names)], detect, set(range(1, len(names) + 1))))
    if same is not None:
        agreed = ", ".join(f"{route} {pct(share)}" for route, share in same.items())
        lines += ["", f"Translations identical between the two servers: {agreed}."]
    return "\n".join(lines)
