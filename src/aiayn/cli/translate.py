"""``translate``, ``evaluate`` and ``attention``: encoder-decoder models."""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import warnings
from pathlib import Path

from aiayn.cli.args import (
    SEARCH_DEFAULTS,
    add_device_arguments,
    add_engine_argument,
    add_quantize_argument,
    add_search_arguments,
    add_stdin_arguments,
    check_placement,
    file_lines,
    float_range,
    int_range,
    load_translator,
    search_options,
    stdin_lines,
    stdin_text,
    text_argument,
)
from aiayn.data.tokenizer import warn_unknown_characters
from aiayn.errors import UserError
from aiayn.fileio import write_text


def add_translate(sub) -> None:
    p = sub.add_parser("translate", help="translate stdin to stdout, one sentence per line")
    p.add_argument(
        "model_dir",
        nargs="+",
        help="model directory; several: an ensemble (their per-step probabilities averaged)",
    )
    add_search_arguments(p)
    p.add_argument(
        "--nbest",
        type=int_range(1),
        default=1,
        help="print N hypotheses (with --sample: N samples, in the order drawn) per sentence "
        "as index<TAB>score<TAB>text; the score is the beam score (log P / length penalty), "
        "or for a sample its log-probability under the model (temperature 1, unfiltered)",
    )
    p.add_argument(
        "--chunk", type=int_range(1), default=2000, help="lines read and sorted at a time"
    )
    p.add_argument(
        "--sample",
        action="store_true",
        help="sample each token from softmax(logits / T) instead of searching (Phuong & "
        "Hutter Algorithm 15); reproducible: line i's samples depend on --seed and i only",
    )
    p.add_argument(
        "--temperature",
        type=float_range(0.0),
        help="with --sample: T >= 0 (default 1; 0 = greedy)",
    )
    p.add_argument(
        "--top-k", type=int_range(1), help="with --sample: keep the K most likely tokens (>= 1)"
    )
    p.add_argument(
        "--top-p",
        type=float_range(0.0, 1.0, low_open=True),
        help="with --sample: keep the most likely tokens up to mass P, in (0, 1]",
    )
    p.add_argument(
        "--seed",
        type=int_range(0, 2**63 - 1),
        help="with --sample: random seed (default 0)",
    )
    p.add_argument(
        "--alignment",
        action="store_true",
        help="print each translation's word alignment after a tab: source-target word "
        "index pairs (fairseq's i-j), read from cross-attention",
    )
    p.add_argument(
        "--prefix-file",
        help="a file of target prefixes, one per input line (empty for none): each "
        "translation begins with its line's prefix and goes on from there",
    )
    add_terminology_arguments(p)
    p.add_argument(
        "--format",
        choices=("text", "html"),
        default="text",
        help="text: one sentence per line; html: stdin is one HTML page or fragment, its text "
        "translated and its markup kept (tags, attributes, scripts), written to stdout",
    )
    p.add_argument(
        "--file",
        help="translate this document whole instead of stdin, its formatting kept: .txt, "
        ".html, .srt, .po, .docx, .pptx, .odt, .odp or .epub (needs the documents extra)",
    )
    p.add_argument("--out", help="with --file: where to write the translated document")
    p.add_argument("--force", action="store_true", help="with --file: replace the file --out names")
    add_stdin_arguments(p)
    add_quantize_argument(p)
    add_engine_argument(p)
    add_device_arguments(p)
    p.set_defaults(func=cmd_translate)


def add_terminology_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--glossary",
        metavar="FILE",
        help='terms to use: JSON in LibreTranslate\'s layout ({"de_en": {"Schraube": '
        '"bolt"}}) or TSV whose first line names the languages (de<TAB>en); a source term '
        "found in a line (ignoring case, on word boundaries) puts its target in the "
        "translation, placed by constrained beam search (beam >= 4)",
    )
    p.add_argument(
        "--keep-placeholders",
        action="store_true",
        help="keep placeholders verbatim (%%s, %%1$s, %%(name)s, {name}, {{name}}, $VAR, <x/>, "
        "URLs, e-mail addresses), each as often as the line has it, placed by constrained "
        "beam search",
    )
    p.add_argument(
        "--keep",
        metavar="REGEX",
        action="append",
        default=[],
        help="also keep what this regular expression matches verbatim (repeatable)",
    )


def terminology_options(args: argparse.Namespace) -> dict:
    """``glossary`` (read now: a bad file fails before the model loads) and ``keep``."""
    from aiayn.data.terminology import PLACEHOLDERS, Glossary, check_patterns

    keep = [*(PLACEHOLDERS if args.keep_placeholders else ()), *check_patterns(args.keep)]
    return {
        "glossary": Glossary.read(args.glossary) if args.glossary else None,
        "keep": keep or None,
    }


def _warn_unmet(results, first: int) -> None:
    lacking = [first + i + 1 for i, t in enumerate(results) if t.unmet]
    if lacking:
        shown = ", ".join(map(str, lacking[:10])) + (" ..." if len(lacking) > 10 else "")
        warnings.warn(
            f"{len(lacking)} translations reached their length limit before holding every "
            f"term (lines {shown}); raise --max-len-offset",
            stacklevel=2,
        )


def _sampling_option(args: argparse.Namespace):
    """The ``Sampling`` of ``translate --sample`` (validated by the API); None without
    --sample."""
    from aiayn.infer.sampling import Sampling

    given = [f for f in ("temperature", "top_k", "top_p", "seed") if getattr(args, f) is not None]
    if not args.sample:
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} needs --sample")
        return None
    temperature = 1.0 if args.temperature is None else args.temperature
    top_p = 1.0 if args.top_p is None else args.top_p
    return Sampling(temperature, args.top_k, top_p, 0 if args.seed is None else args.seed)


def one_line(text: str, tabs: bool = False) -> str:
    """``text`` on one output line: a line break a model wrote (a sampled newline byte, or
    any other character ``str.splitlines`` breaks at) becomes a space, so output line i
    stays the translation of input line i; with ``tabs``, tabs too (the n-best columns)."""
    return (_BREAKS_AND_TABS if tabs else _BREAKS).sub(" ", text)


_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BREAKS_AND_TABS = re.compile("[\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def cmd_translate(args: argparse.Namespace) -> None:
    import time

    from aiayn.api.options import check_translate
    from aiayn.infer.translate import produced_tokens

    options = {**search_options(args), "nbest": args.nbest, "sampling": _sampling_option(args)}
    defaults = {**SEARCH_DEFAULTS, "beam": max(args.nbest, 1) if options["sampling"] is None else 1}
    check_translate(**{**defaults, **options})
    check_placement(args)
    terms = terminology_options(args)
    if args.file or args.out:
        _translate_file(args, {**options, **terms})
        return
    if args.force:
        raise UserError("--force applies to --file and --out (it replaces the file --out names)")
    if args.format == "html":
        _translate_html(args, {**options, **terms})
        return
    prefixes_in = file_lines(args.prefix_file, "--prefix-file") if args.prefix_file else None
    translator = load_translator("translate", args)
    total, seconds, produced = 0, 0.0, 0
    lines_in = stdin_lines(args.errors)
    while True:  # stream: read a chunk, translate it (length-sorted inside), print in order
        lines = list(itertools.islice(lines_in, args.chunk))
        if not lines:
            break
        where = f"stdin lines {total + 1}-{total + len(lines)}"
        warn_unknown_characters(translator.tokenizer, lines, where)
        prefixes = _prefixes(prefixes_in, args.prefix_file, len(lines), total)
        start = time.perf_counter()
        scored = args.nbest > 1  # a single translation is printed without its score
        results = translator.translate(
            lines,
            first_index=total,
            scores=scored,
            prefix=prefixes,
            alignment=args.alignment,
            **options,
            **terms,
        )
        seconds += time.perf_counter() - start
        _warn_unmet(results, total)
        truncated = [i for i, t in enumerate(results) if t.truncated]
        _warn_truncated(truncated, total, translator.config.max_len)
        for i, result in enumerate(results):
            produced += produced_tokens(result.hypotheses, options["sampling"])
            if args.nbest == 1 and args.alignment:
                pairs = " ".join(f"{i}-{j}" for i, j in result.alignment or ())
                print(f"{one_line(result.text, tabs=True)}\t{pairs}")
            elif args.nbest == 1:
                print(one_line(result.text))
            else:
                for h in result.hypotheses:
                    print(f"{total + i}\t{h.score:.4f}\t{one_line(h.text, tabs=True)}")
        sys.stdout.flush()
        total += len(lines)
    if prefixes_in is not None and next(prefixes_in, None) is not None:
        raise UserError(
            f"--prefix-file {args.prefix_file}: more lines than stdin's {total}; give one "
            "prefix per input line"
        )
    print(
        f"translated {total} sentences in {seconds:.1f}s: {total / max(seconds, 1e-9):.1f} "
        f"sentences/s, {produced / max(seconds, 1e-9):.0f} tokens/s",
        file=sys.stderr,
    )


def _translate_html(args: argparse.Namespace, options: dict) -> None:
    for flag, given in (
        ("--nbest", args.nbest > 1),
        ("--alignment", args.alignment),
        ("--prefix-file", args.prefix_file),
    ):
        if given:
            raise UserError(f"{flag} applies to --format text, not html")
    html = stdin_text(args.errors)
    translator = load_translator("translate", args)
    options = {k: v for k, v in options.items() if k != "nbest"}
    (out,) = translator.translate_html([html], names=["stdin"], **options)
    sys.stdout.write(out if out.endswith("\n") else out + "\n")


def _translate_file(args: argparse.Namespace, options: dict) -> None:
    if not (args.file and args.out):
        missing = "--out" if args.file else "--file"
        raise UserError(f"{missing}: --file and --out go together (a document in, one out)")
    for flag, given in (
        ("--nbest", args.nbest > 1),
        ("--alignment", args.alignment),
        ("--prefix-file", args.prefix_file),
        ("--format", args.format != "text"),
    ):
        if given:
            raise UserError(f"{flag} does not apply to --file (a document's format is its own)")
    from aiayn import documents

    if documents.format_for(args.file) is None:  # before the model loads
        formats = ", ".join(documents.supported_formats())
        raise UserError(f"--file {args.file}: file format not supported; supported: {formats}")
    out = Path(args.out)
    if out.exists() and not (out.is_file() and args.force):  # before the model loads
        what = "exists; choose another or add --force" if out.is_file() else "is a directory"
        raise UserError(f"--out {out} {what}")
    translator = load_translator("translate", args)
    options = {k: v for k, v in options.items() if k != "nbest"}
    out = translator.translate_file(args.file, args.out, **options)
    print(f"wrote {out}", file=sys.stderr)


def _prefixes(lines_in, path: str | None, n: int, done: int) -> list[str] | None:
    """The next ``n`` prefixes of ``--prefix-file`` (None without one)."""
    if lines_in is None:
        return None
    prefixes = list(itertools.islice(lines_in, n))
    if len(prefixes) < n:
        raise UserError(
            f"--prefix-file {path}: {done + len(prefixes)} lines, but stdin has more; give one "
            "prefix per input line (an empty line for none)"
        )
    return prefixes


def _warn_truncated(indices: list[int], offset: int, max_len: int, shown: int = 3) -> None:
    if not indices:
        return
    lines = ", ".join(str(offset + i + 1) for i in indices[:shown])
    more = f" and {len(indices) - shown} more" if len(indices) > shown else ""
    warnings.warn(
        f"stdin line {lines}{more}: longer than the model's max_len ({max_len} tokens); "
        f"only the first {max_len - 1} tokens are translated",
        stacklevel=2,
    )


def add_attention(sub) -> None:
    p = sub.add_parser("attention", help="plot attention heatmaps of one sentence to a PNG")
    p.add_argument("model_dir")
    p.add_argument("sentence")
    p.add_argument("--out", default="attention.png")
    p.add_argument("--self", action="store_true", help="also encoder and decoder self-attention")
    add_device_arguments(p)
    p.set_defaults(func=cmd_attention)


def cmd_attention(args: argparse.Namespace) -> None:
    from aiayn.api import load_for
    from aiayn.viz import plot_attention

    check_placement(args)
    translator = load_for("attention", args.model_dir, device=args.device, dtype=args.dtype)
    sentence = text_argument(args.sentence, "the sentence")
    warn_unknown_characters(translator.tokenizer, [sentence], "the sentence")
    out = plot_attention(
        translator.model, translator.tokenizer, sentence, Path(args.out), self_attention=args.self
    )
    print(f"wrote {out}")


def add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="sacreBLEU and chrF of a model on a corpus split")
    p.add_argument("model_dir")
    p.add_argument("--split", default="test")
    p.add_argument("--corpus", help="corpus directory (default: the one the model was trained on)")
    p.add_argument(
        "--output",
        help="where to write the hypotheses (default: MODEL/SPLIT.hyp.txt; for an Argos "
        "Translate package or a CTranslate2 model, NAME.SPLIT.hyp.txt here)",
    )
    p.add_argument(
        "--limit", type=int_range(0), default=0, help="only the first N sentences (0 = all)"
    )
    p.add_argument("--samples", type=int_range(0), default=5, help="sample translations to print")
    add_search_arguments(p)
    add_quantize_argument(p)
    add_engine_argument(p)
    add_device_arguments(p)
    p.set_defaults(func=cmd_evaluate)


def _scored_weights(args: argparse.Namespace) -> dict:
    """{"weights": which weights ``evaluate`` scored, in words} (what the directory's run.json
    records: the step, the checkpoints averaged, int8), or {} when nothing says."""
    from aiayn.modeldir import ModelDir

    directory = ModelDir(args.model_dir)
    weights = directory.describe_weights()
    if weights is None:
        return {}
    if args.quantize and not directory.quantization:
        weights += f", quantized to {args.quantize} as they loaded (--quantize)"
    return {"weights": weights}


def cmd_evaluate(args: argparse.Namespace) -> None:
    from aiayn.api.package import PackageTranslator
    from aiayn.config import DataConfig
    from aiayn.evaluate import evaluate_translation

    check_placement(args)
    translator = load_translator("evaluate", args)
    data = translator.run.get("data", {})
    config = DataConfig(
        corpus=args.corpus or data.get("corpus", "data/ding-de-en"),
        src_lang=data.get("src_lang", "de"),
        tgt_lang=data.get("tgt_lang", "en"),
    )
    search = search_options(args)
    package = isinstance(translator, PackageTranslator)  # its own search; its import's perplexity

    def own(texts: list[str]) -> list[str]:
        return [t.text for t in translator.translate(texts, **search)]

    model, tokenizer = translator.model, translator.tokenizer
    scores, pairs, hyps = evaluate_translation(
        model, tokenizer, config, args.split, args.limit,
        None if package else translator.decoder, own if package else None, **search,
    )  # fmt: skip
    if args.output:
        out = Path(args.output)
    elif package:  # here, not into its archive or Argos Translate's folder
        out = Path(f"{Path(args.model_dir).stem}.{args.split}.hyp.txt")
    else:
        out = Path(args.model_dir) / f"{args.split}.hyp.txt"
    write_text(out, "".join(h + "\n" for h in hyps))
    described = {"model": args.model_dir, **({} if package else _scored_weights(args))}
    print(json.dumps({**described, **scores, "hypotheses": str(out)}, indent=2))
    for (src, ref), hyp in list(zip(pairs, hyps, strict=True))[: args.samples]:
        print(f"\n  source:     {src}\n  reference:  {ref}\n  hypothesis: {hyp}")
