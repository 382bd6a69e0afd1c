"""Command line: parse arguments, build a config, call the library. No logic of its own."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shlex
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

from aiayn.config import ModelConfig
from aiayn.data.corpora.registry import CORPORA as BUNDLED_CORPORA
from aiayn.errors import TrainingInterrupted, UserError, describe_os_error

CORPORA = (*BUNDLED_CORPORA, "files")


def cmd_params(args: argparse.Namespace) -> None:
    import torch

    from aiayn.model import build_model
    from aiayn.model.summary import format_table, parameter_table

    config = ModelConfig.preset(args.preset, family=args.family)
    with torch.device("meta"):  # count shapes without allocating the weights
        model = build_model(config)
    title = (
        f"{args.preset} {config.family}: d_model={config.d_model} n_heads={config.n_heads} "
        f"d_ff={config.d_ff} layers={config.n_encoder_layers}+{config.n_decoder_layers} "
        f"vocab={config.vocab_size} tie={config.tie_embeddings}"
    )
    print(format_table(parameter_table(model), title))


def cmd_prepare(args: argparse.Namespace) -> None:
    out = Path(args.out or f"data/{args.corpus}")
    source = Path(args.source) if args.source else None
    if args.corpus == "files":
        if args.source:
            raise UserError("--source is for the bundled corpora; prepare files reads --split")
        stats = import_files(out, args.split or [], args.src_lang, args.tgt_lang, args.force)
    elif args.split:
        raise UserError(f"--split is for prepare files; {args.corpus} builds its own splits")
    elif (out / "stats.json").is_file() and not args.rebuild:
        from aiayn.errors import read_json_object

        stats = read_json_object(out / "stats.json", "corpus stats")
        expected = BUNDLED_CORPORA[args.corpus].files
        missing = [name for name in expected if not (out / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{out}: missing {', '.join(missing)}; use --rebuild")
        print(f"{out}: using the bundled corpus (--rebuild to rebuild it from its package)")
    else:
        stats = BUNDLED_CORPORA[args.corpus].build(out, source)
    counts = {k: stats[k] for k in ("pairs", "snippets", "characters") if k in stats}
    print(json.dumps(counts or stats, indent=2))


def import_files(
    out: Path, specs: list[str], src_lang: str, tgt_lang: str, force: bool = False
) -> dict:
    """``--split NAME=SRC,TGT`` (two aligned files), ``NAME=FILE.tsv`` or ``NAME=FILE.jsonl``
    (Hugging Face translation records) into ``out``.

    Every file is read before anything is written. Splits already in ``out`` are replaced only
    with ``force``; a split added to a corpus joins the counts in its stats.json.
    """
    import re

    from aiayn.data.corpora.common import write_parallel
    from aiayn.data.files import read_jsonl, read_parallel, read_tsv
    from aiayn.errors import read_json_object
    from aiayn.modeldir import write_json

    if not specs:
        raise UserError(
            "prepare files needs --split NAME=SRC,TGT, NAME=FILE.tsv or NAME=FILE.jsonl"
        )
    for flag, lang in (("--src-lang", src_lang), ("--tgt-lang", tgt_lang)):
        if not re.fullmatch(r"[A-Za-z0-9_-]+", lang):
            raise UserError(f"{flag} {lang!r}: a language code of letters, digits, - or _")
    if src_lang == tgt_lang:
        raise UserError(f"--src-lang and --tgt-lang are both {src_lang!r}; they name two files")
    pairs_by_split = {}
    for spec in specs:
        name, _, files = spec.partition("=")
        if not name or not files:
            raise UserError(f"--split {spec!r}: expected NAME=SRC,TGT, NAME=FILE.tsv or .jsonl")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise UserError(f"--split {spec!r}: a split name of letters, digits, - or _")
        if name in pairs_by_split:
            raise UserError(f"--split {name} is given twice; give each split once")
        paths = [Path(p) for p in files.split(",")]
        for path in paths:
            if not path.is_file():
                raise UserError(f"--split {spec!r}: {path} not found")
        if len(paths) == 2:
            pairs = read_parallel(*paths)
        elif len(paths) == 1 and ".jsonl" in paths[0].suffixes:
            pairs = read_jsonl(paths[0], src_lang, tgt_lang)
        elif len(paths) == 1:
            pairs = read_tsv(paths[0])
        else:
            raise UserError(
                f"--split {spec!r}: give two files (SRC,TGT), one TSV file or one .jsonl file"
            )
        if not pairs:
            raise UserError(
                f"--split {spec!r}: no sentence pairs (every line is blank or has an empty side)"
            )
        pairs_by_split[name] = pairs
    targets = [
        out / f"{name}.{lang}.gz" for name in pairs_by_split for lang in (src_lang, tgt_lang)
    ]
    existing = [p.name for p in targets if p.exists()]
    if existing and not force:
        raise UserError(
            f"{out} already holds {', '.join(existing)}; add --force to replace them "
            "(or prepare into another --out)"
        )
    old = read_json_object(out / "stats.json") if (out / "stats.json").is_file() else {}
    for name, pairs in pairs_by_split.items():
        write_parallel(out, name, pairs, src_lang, tgt_lang)
    counts = old.get("pairs") if isinstance(old.get("pairs"), dict) else {}
    stats = {"pairs": {**counts, **{name: len(p) for name, p in pairs_by_split.items()}}}
    write_json(out / "stats.json", stats)
    return stats


def cmd_train(args: argparse.Namespace) -> None:
    from aiayn.config import load_run_config
    from aiayn.train.loop import train

    run = load_run_config(args.config, args.set or [])
    out = Path(args.out or f"runs/{Path(args.config).stem if args.config else 'run'}")
    try:
        summary = train(run, out, progress=not args.quiet)
    except TrainingInterrupted as e:
        command = shlex.join(["aiayn", *args.argv])
        raise TrainingInterrupted(f"{e}; resume with: {command}", e.signal_number) from None
    if summary:  # rank 0 of a torchrun launch, or the only process
        print(json.dumps(summary, indent=2))


# which commands fit a model directory's family (and, for encoder-only, its head)
FAMILY_COMMANDS = {
    "encoder-decoder": "translate, evaluate or attention",
    "decoder-only": "generate",
    "encoder-only classifier": "classify or embed",
    "encoder-only": "embed, or train with train.init_from = it (a pretrained encoder)",
}
COMMAND_FAMILIES = {
    "translate": "encoder-decoder",
    "evaluate": "encoder-decoder",
    "attention": "encoder-decoder",
    "generate": "decoder-only",
    "embed": "encoder-only",
}


def _kind(config: ModelConfig) -> str:
    if config.family == "encoder-only" and config.n_classes:
        return "encoder-only classifier"
    return config.family


def _load(model_dir: str, command: str, quantize: str | None = None, engine: str = "torch"):
    """The model and tokenizer of ``model_dir``, if its family fits ``command``; with
    ``engine`` "ctranslate2", a ``CTranslate2Engine`` decodes in the model's place."""
    from aiayn.modeldir import load_config, load_model_and_tokenizer

    want = COMMAND_FAMILIES[command]
    have = load_config(model_dir)
    if have.family != want:
        article = "an" if want[0] in "aeiou" else "a"
        raise UserError(
            f"{model_dir} holds a model of the {_kind(have)} family; {command} needs {article} "
            f"{want} model (this directory fits: aiayn {FAMILY_COMMANDS[_kind(have)]})"
        )
    if engine == "ctranslate2":
        from aiayn.interop.ctranslate2 import CTranslate2Engine

        decoder = CTranslate2Engine(model_dir, quantize=quantize)
        return decoder, decoder.tokenizer
    return load_model_and_tokenizer(model_dir, quantize=quantize)


def _stdin_lines(errors: str) -> Iterator[str]:
    """Lines of stdin without their line ending; bytes that are not UTF-8 are an error naming
    the line, unless ``errors`` is "replace" (U+FFFD) or "ignore"."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream (tests): already decoded
        for line in sys.stdin:
            yield line.rstrip("\r\n")
        return
    for number, raw in enumerate(stream, 1):
        try:
            text = raw.decode("utf-8", errors)
        except UnicodeDecodeError as e:
            raise UserError(
                f"stdin, line {number}: not UTF-8 (byte 0x{raw[e.start]:02x} at column "
                f"{e.start + 1}); pass --errors replace to read bad bytes as U+FFFD, or convert "
                "the input, e.g. iconv -f latin1 -t utf-8"
            ) from None
        yield text.rstrip("\r\n")


def _text_argument(value: str, flag: str) -> str:
    """A text given on the command line; bytes that were not UTF-8 are an error."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"{flag}: the text is not UTF-8; give it in UTF-8") from None
    return value


def _warn_unknown_characters(tokenizer, texts: list[str], where: str) -> None:
    unknown = tokenizer.unknown_characters(texts)
    if unknown:
        shown = " ".join(repr(c) for c in unknown[:10]) + (" ..." if len(unknown) > 10 else "")
        warnings.warn(
            f"{where}: {len(unknown)} character(s) not in the model's vocabulary are read as "
            f"<unk>: {shown}",
            stacklevel=2,
        )


def _search_options(args: argparse.Namespace) -> dict:
    return dict(
        beam=args.beam,
        lenpen=args.lenpen,
        max_len_offset=args.max_len_offset,
        early_stop=args.early_stop,
    )


def _sampling_option(args: argparse.Namespace):
    """The validated ``Sampling`` of ``translate --sample``; None without --sample."""
    import math

    from aiayn.infer.sampling import Sampling

    given = [f for f in ("temperature", "top_k", "top_p", "seed") if getattr(args, f) is not None]
    if not args.sample:
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} needs --sample")
        return None
    if args.beam != 1:
        raise ValueError(f"--sample draws one token at a time: use it without --beam ({args.beam})")
    if args.early_stop:
        raise ValueError("--early-stop is for beam search: use it without --sample")
    temperature = 1.0 if args.temperature is None else args.temperature
    if not (temperature >= 0 and math.isfinite(temperature)):
        raise ValueError(
            f"--temperature must be a finite number >= 0 (0 = greedy), got {temperature}"
        )
    if args.top_k is not None and args.top_k < 1:
        raise ValueError(
            f"--top-k must be >= 1 (leave it out for no top-k filter), got {args.top_k}"
        )
    top_p = 1.0 if args.top_p is None else args.top_p
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"--top-p must be in (0, 1] (1 = no nucleus filter), got {top_p}")
    seed = 0 if args.seed is None else args.seed
    if seed < 0:
        raise ValueError(f"--seed must be >= 0, got {seed}")
    return Sampling(temperature, args.top_k, top_p, seed)


def cmd_translate(args: argparse.Namespace) -> None:
    from aiayn.infer.translate import translate

    options = {**_search_options(args), "nbest": args.nbest, "sampling": _sampling_option(args)}
    if options["sampling"] is None and args.nbest > args.beam:
        raise UserError(
            f"--nbest ({args.nbest}) cannot exceed --beam ({args.beam}); with --sample, "
            "--nbest N draws N samples"
        )
    model, tokenizer = _load(args.model_dir, "translate", args.quantize, args.engine)
    total, seconds, produced = 0, 0.0, 0.0
    lines_in = _stdin_lines(args.errors)
    while True:  # stream: read a chunk, translate it (length-sorted inside), print in order
        lines = list(itertools.islice(lines_in, args.chunk))
        if not lines:
            break
        _warn_unknown_characters(tokenizer, lines, f"stdin lines {total + 1}-{total + len(lines)}")
        stats: dict = {}
        results = translate(model, tokenizer, lines, stats=stats, first_index=total, **options)
        _warn_truncated(stats.get("truncated", []), total, model.config.max_len)
        for i, n_best in enumerate(results):
            if args.nbest == 1:
                print(n_best[0][0])
            else:
                for text, score in n_best:
                    print(f"{total + i}\t{score:.4f}\t{text}")
        sys.stdout.flush()
        total += len(lines)
        seconds += len(lines) / stats["sentences_per_s"]
        produced += stats["tokens_per_s"] * len(lines) / stats["sentences_per_s"]
    print(
        f"translated {total} sentences in {seconds:.1f}s: {total / max(seconds, 1e-9):.1f} "
        f"sentences/s, {produced / max(seconds, 1e-9):.0f} tokens/s",
        file=sys.stderr,
    )


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


def cmd_average(args: argparse.Namespace) -> None:
    import torch

    from aiayn.data.tokenizer import load_tokenizer
    from aiayn.model import build_model
    from aiayn.train import checkpoint as ckpt
    from aiayn.train.loop import save_trained_model
    from aiayn.train.tasks import make_task

    run_dir, out = Path(args.run_dir), _fresh_output(Path(args.out), args.force)
    paths = ckpt.list_checkpoints(run_dir / "checkpoints")
    if not paths:
        raise UserError(f"{run_dir / 'checkpoints'}: no checkpoints to average")
    paths = paths[-args.last :]
    state = ckpt.load_checkpoint(paths[-1])
    run = ckpt.run_config_of(state, paths[-1])
    tokenizer = load_tokenizer(run_dir)
    task = make_task(run)
    config = run.model.replace(
        vocab_size=tokenizer.vocab_size, family=task.family, **task.model_overrides()
    )
    model = build_model(config)
    hint = f"the model is built from its run config and {run_dir}'s tokenizer"
    ckpt.load_model_state(model, ckpt.average_checkpoints(paths), paths[-1], hint)
    extra = {"averaged": [p.name for p in paths], **task.saved_extra()}
    dtype = torch.float16 if args.fp16 else None
    save_trained_model(out, model.eval(), tokenizer, run, dtype=dtype, extra=extra)
    print(
        f"averaged {len(paths)} checkpoints ({paths[0].name} .. {paths[-1].name}) into {args.out}"
    )


def cmd_generate(args: argparse.Namespace) -> None:
    import torch

    from aiayn.infer.sampling import generate
    from aiayn.modeldir import read_run_json

    model, tokenizer = _load(args.model_dir, "generate", args.quantize)
    text = _text_argument(args.prompt, "--prompt")
    _warn_unknown_characters(tokenizer, [text], "--prompt")
    prompt = tokenizer.encode([text])[0] or [tokenizer.bos_id]
    data = read_run_json(args.model_dir).get("data", {})
    context = data.get("block_size") or model.config.max_len  # what the model was trained on
    if len(prompt) > context:
        print(f"warning: only the last {context} tokens of the prompt are used", file=sys.stderr)
    out = generate(
        model,
        torch.tensor([prompt]),
        args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        context=context,
    )
    print(tokenizer.decode([out[0].tolist()])[0])


def cmd_classify(args: argparse.Namespace) -> None:
    from aiayn.infer.classify import class_probabilities

    texts = list(_stdin_lines(args.errors))
    labels, probs = class_probabilities(
        [Path(d) for d in args.model_dir], texts, quantize=args.quantize
    )
    for row in probs:  # (C,)
        best = int(row.argmax())
        print(f"{labels[best]}\t{row[best]:.4f}")


def cmd_embed(args: argparse.Namespace) -> None:
    """One JSON list of floats (the pooled encoder states) per line of stdin, in order."""
    import warnings

    from aiayn.infer.embed import embed_texts

    if args.chunk < 1:
        raise ValueError(f"--chunk must be >= 1, got {args.chunk}")
    model, tokenizer = _load(args.model_dir, "embed", args.quantize)
    while True:  # stream: read a chunk, embed it (length-sorted inside), print in order
        lines = [line.rstrip("\n") for _, line in zip(range(args.chunk), sys.stdin, strict=False)]
        if not lines:
            break
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            vectors = embed_texts(model, tokenizer, lines, normalize=args.normalize)  # (N, D)
        for warning in caught:
            print(f"warning: {warning.message}", file=sys.stderr)
        for row in vectors.numpy():  # float32's shortest exact decimal form
            print("[" + ", ".join(str(x) for x in row) + "]")
        sys.stdout.flush()


def _add_embed_parser(sub) -> None:
    p = sub.add_parser("embed", help="embed each line of stdin: one JSON list of floats per line")
    p.add_argument("model_dir", help="an encoder-only model (pooled as its model.pooling says)")
    p.add_argument("--normalize", action="store_true", help="scale each vector to unit length")
    p.add_argument("--chunk", type=int, default=2000, help="lines read and embedded at a time")
    _add_quantize_argument(p)
    p.set_defaults(func=cmd_embed)


def cmd_quantize(args: argparse.Namespace) -> None:
    import shutil

    from aiayn.model.quantize import quantize
    from aiayn.modeldir import CONFIG_FILE, WEIGHTS_FILE, load_model_dir, save_model_dir

    src, out = Path(args.model_dir), Path(args.out)
    if out.resolve() == src.resolve():
        raise UserError(f"--out {out}: write the quantized model to another directory")
    _fresh_output(out, args.force)
    model = load_model_dir(src)
    if getattr(model, "quantization", None):
        raise UserError(f"{src} is already quantized ({model.quantization['method']})")
    model = quantize(model, args.method, include_output=not args.keep_output_float)
    out.mkdir(parents=True, exist_ok=True)
    for item in sorted(src.iterdir()):  # tokenizer, run.json, ...: everything but the weights
        if item.is_file() and item.name not in (CONFIG_FILE, WEIGHTS_FILE):
            shutil.copy2(item, out / item.name)
    save_model_dir(out, model)
    size = (out / WEIGHTS_FILE).stat().st_size / 2**20
    print(f"wrote {args.method} model to {out} ({size:.1f} MiB of weights)")


def cmd_attention(args: argparse.Namespace) -> None:
    from aiayn.viz import plot_attention

    model, tokenizer = _load(args.model_dir, "attention")
    sentence = _text_argument(args.sentence, "the sentence")
    _warn_unknown_characters(tokenizer, [sentence], "the sentence")
    out = plot_attention(model, tokenizer, sentence, Path(args.out), self_attention=args.self)
    print(f"wrote {out}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    from aiayn.config import DataConfig
    from aiayn.evaluate import evaluate_translation
    from aiayn.modeldir import read_run_json, write_text

    model, tokenizer = _load(args.model_dir, "evaluate", args.quantize)
    decoder = None  # the model itself; the engine, when another one is asked for
    if args.engine != "torch":
        decoder = _load(args.model_dir, "evaluate", args.quantize, args.engine)[0]
    data = read_run_json(args.model_dir).get("data", {})
    config = DataConfig(
        corpus=args.corpus or data.get("corpus", "data/ding-de-en"),
        src_lang=data.get("src_lang", "de"),
        tgt_lang=data.get("tgt_lang", "en"),
    )
    scores, pairs, hyps = evaluate_translation(
        model, tokenizer, config, args.split, args.limit, decoder=decoder, **_search_options(args)
    )
    out = Path(args.output or Path(args.model_dir) / f"{args.split}.hyp.txt")
    write_text(out, "".join(h + "\n" for h in hyps))
    print(json.dumps({**scores, "hypotheses": str(out)}, indent=2))
    for (src, ref), hyp in list(zip(pairs, hyps, strict=True))[: args.samples]:
        print(f"\n  source:     {src}\n  reference:  {ref}\n  hypothesis: {hyp}")


def _fresh_output(out: Path, force: bool) -> Path:
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise UserError(f"--out {out} exists and is not empty; choose another or add --force")
    return out


def cmd_import(args: argparse.Namespace) -> None:
    from aiayn.interop.hf import import_hf

    summary = import_hf(args.src, _fresh_output(Path(args.out), args.force))
    print(json.dumps(summary, indent=2))


def cmd_export(args: argparse.Namespace) -> None:
    model_dir, out = Path(args.model_dir), _fresh_output(Path(args.out), args.force)
    if args.format != "argos" and (args.source_lang or args.target_lang):
        raise UserError("--from and --to are for --format argos")
    if args.format == "hf":
        from aiayn.interop.hf import export_hf

        if args.quantize:
            raise UserError("--quantize is for --format ctranslate2 or argos")
        summary = export_hf(model_dir, out)
    elif args.format == "ctranslate2":
        from aiayn.interop.ctranslate2 import export_ctranslate2

        summary = export_ctranslate2(model_dir, out, args.quantize)
    else:
        from aiayn.interop.argos import export_argos

        summary = export_argos(model_dir, out, args.source_lang, args.target_lang, args.quantize)
    print(json.dumps(summary, indent=2))


def _add_interop_parsers(sub) -> None:
    p = sub.add_parser(
        "import",
        help="convert a Hugging Face model (BERT, GPT-2, Marian) into an aiayn model directory",
    )
    p.add_argument("src", help="a local Hugging Face model directory (or a hub name)")
    p.add_argument("--out", required=True, help="the aiayn model directory to write")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("export", help="write an aiayn model directory in another format")
    p.add_argument("model_dir")
    p.add_argument(
        "--format",
        choices=["hf", "ctranslate2", "argos"],
        default="hf",
        help="hf: a Hugging Face (Marian, BERT, GPT-2) directory; ctranslate2: a CTranslate2 "
        "model directory with its sentencepiece model; argos: an Argos Translate package "
        "(.argosmodel) that Argos Translate and LibreTranslate install",
    )
    p.add_argument("--out", required=True, help="the directory (argos: the file) to write")
    p.add_argument(
        "--quantize", choices=["int8"], help="ctranslate2 / argos: CTranslate2's int8 weights"
    )
    p.add_argument("--from", dest="source_lang", help="argos: source language code (run.json's)")
    p.add_argument("--to", dest="target_lang", help="argos: target language code (run.json's)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out")
    p.set_defaults(func=cmd_export)


def cmd_serve(args: argparse.Namespace) -> None:
    import dataclasses

    from aiayn.serve.config import ServeConfig

    try:
        from aiayn.serve.server import model_specs, run_server
    except ImportError as e:
        raise RuntimeError(
            f"serve needs the serve extra: pip install 'aiayn[serve]' ({e})"
        ) from None
    config = ServeConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ServeConfig)})
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    specs = model_specs(args.model_dir, args.name, args.languages, args.quantize, args.engine)
    run_server(specs, config, args.host, args.port)


def int_range(low: int, high: int | None = None):
    """An argparse ``type``: an integer in [low, high] (no upper bound when ``high`` is None)."""
    allowed = f">= {low}" if high is None else f"in [{low}, {high}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer {allowed}, got {text!r}"
            ) from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value}")
        return value

    return parse


def float_range(low: float, high: float = math.inf, low_open: bool = False):
    """An argparse ``type``: a finite number in [low, high] ((low, high] with ``low_open``);
    NaN and infinities are refused."""
    bound = "(" if low_open else "["
    allowed = f"a finite number >= {low}" if high == math.inf else f"in {bound}{low}, {high}]"
    if low_open and high == math.inf:
        allowed = f"a finite number > {low}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        too_low = value <= low if low_open else value < low
        if not math.isfinite(value) or too_low or value > high:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text}")
        return value

    return parse


def _add_stdin_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--errors",
        choices=("strict", "replace", "ignore"),
        default="strict",
        help="bytes of stdin that are not UTF-8: an error naming the line (strict), read as "
        "U+FFFD (replace) or dropped (ignore)",
    )


def _add_search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--beam", type=int_range(1), default=1, help="beam size (1 = greedy; the paper: 4)"
    )
    p.add_argument(
        "--lenpen", type=float_range(0.0), default=0.6, help="length penalty alpha >= 0 (§6.1)"
    )
    p.add_argument(
        "--max-len-offset",
        type=int_range(0),
        default=50,
        help="max output length = source length + N (N >= 0)",
    )
    p.add_argument(
        "--early-stop",
        action="store_true",
        help="beam: stop a sentence once its best live hypothesis, finished now, would lose "
        "(faster; the default stops only when no live hypothesis can still win)",
    )


def _add_engine_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=["torch", "ctranslate2"],
        default="torch",
        help="what decodes: aiayn's PyTorch model, or CTranslate2 (converted once and cached "
        "in MODEL/.ctranslate2; pip install 'aiayn[ctranslate2]')",
    )


def _add_quantize_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quantize",
        choices=["int8"],
        help="quantize the linear layers after loading (CPU; int8: dynamic int8, faster)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="aiayn",
        description="The Transformer of 'Attention Is All You Need'.",
        debug_default=False,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    families = ["encoder-decoder", "encoder-only", "decoder-only"]

    p = sub.add_parser("params", help="print a per-component parameter table of a preset")
    p.add_argument("preset", choices=list(ModelConfig.PRESETS))
    p.add_argument("--family", default="encoder-decoder", choices=families)
    p.set_defaults(func=cmd_params)

    p = sub.add_parser("prepare", help="prepare a corpus under data/")
    p.add_argument("corpus", choices=CORPORA)
    p.add_argument("--out", help="output directory (default data/CORPUS)")
    p.add_argument("--rebuild", action="store_true", help="rebuild from the source package")
    p.add_argument("--source", help="a local copy of the source file or package to read instead")
    p.add_argument(
        "--split",
        action="append",
        metavar="NAME=SRC,TGT|NAME=FILE.tsv|NAME=FILE.jsonl",
        help="with 'files': a split of your own data (repeat for train, valid, test); .jsonl "
        "files hold Hugging Face translation records",
    )
    p.add_argument("--src-lang", default="de", help="with 'files': source language suffix")
    p.add_argument("--tgt-lang", default="en", help="with 'files': target language suffix")
    p.add_argument(
        "--force", action="store_true", help="with 'files': replace splits --out already holds"
    )
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("train", help="train (or resume) a model from a TOML config")
    p.add_argument("config", nargs="?", help="TOML run config (configs/*.toml)")
    p.add_argument("--out", help="run directory (default runs/CONFIG_NAME); resumes if present")
    p.add_argument(
        "--set", action="append", metavar="SECTION.KEY=VALUE", help="override a config value"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("translate", help="translate stdin to stdout, one sentence per line")
    p.add_argument("model_dir")
    _add_search_arguments(p)
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
    _add_stdin_arguments(p)
    _add_quantize_argument(p)
    _add_engine_argument(p)
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("average", help="average the last K checkpoints into a model directory")
    p.add_argument("run_dir")
    p.add_argument("--last", type=int_range(1), default=5, help="how many checkpoints (>= 1)")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--fp16", action="store_true", help="store the weights in float16 (half size)")
    p.add_argument("--force", action="store_true", help="replace the model in an existing --out")
    p.set_defaults(func=cmd_average)

    p = sub.add_parser("generate", help="continue a prompt with a decoder-only model")
    p.add_argument("model_dir")
    p.add_argument("--prompt", default="", help="text to continue")
    p.add_argument("--max-new-tokens", type=int_range(0), default=200)
    p.add_argument("--temperature", type=float_range(0.0), default=0.8, help="0 = greedy")
    p.add_argument("--top-k", type=int_range(0), default=0, help="0 = no top-k filter")
    p.add_argument(
        "--top-p",
        type=float_range(0.0, 1.0, low_open=True),
        default=1.0,
        help="in (0, 1]; 1 = no nucleus filter",
    )
    p.add_argument(
        "--seed", type=int_range(0, 2**63 - 1), default=None, help="seed for reproducible samples"
    )
    _add_quantize_argument(p)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("classify", help="label each line of stdin: label<TAB>probability")
    p.add_argument(
        "model_dir", nargs="+", help="a classifier; several: their probabilities are averaged"
    )
    _add_stdin_arguments(p)
    _add_quantize_argument(p)
    p.set_defaults(func=cmd_classify)

    _add_embed_parser(sub)

    p = sub.add_parser("quantize", help="write an int8 copy of a model directory")
    p.add_argument("model_dir")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--method", default="int8", choices=["int8"])
    p.add_argument(
        "--keep-output-float",
        action="store_true",
        help="keep the projection to the vocabulary in float32",
    )
    p.add_argument("--force", action="store_true", help="replace the model in a non-empty --out")
    p.set_defaults(func=cmd_quantize)

    p = sub.add_parser("attention", help="plot attention heatmaps of one sentence to a PNG")
    p.add_argument("model_dir")
    p.add_argument("sentence")
    p.add_argument("--out", default="attention.png")
    p.add_argument("--self", action="store_true", help="also encoder and decoder self-attention")
    p.set_defaults(func=cmd_attention)

    p = sub.add_parser("evaluate", help="sacreBLEU and chrF of a model on a corpus split")
    p.add_argument("model_dir")
    p.add_argument("--split", default="test")
    p.add_argument("--corpus", help="corpus directory (default: the one the model was trained on)")
    p.add_argument("--output", help="where to write the hypotheses")
    p.add_argument(
        "--limit", type=int_range(0), default=0, help="only the first N sentences (0 = all)"
    )
    p.add_argument("--samples", type=int_range(0), default=5, help="sample translations to print")
    _add_search_arguments(p)
    _add_quantize_argument(p)
    _add_engine_argument(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("serve", help="serve models over HTTP (LibreTranslate and OpenAI APIs)")
    p.add_argument("model_dir", nargs="+", help="model directories to serve")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int_range(0, 65535), default=8000)
    p.add_argument("--name", action="append", help="name of each model, in order (default: dir)")
    p.add_argument("--languages", action="append", help="of each model, in order: SRC-TGT or LANG")
    p.add_argument(
        "--threads", type=int_range(0), default=0, help="torch threads (0 = torch's default)"
    )
    _add_quantize_argument(p)
    _add_engine_argument(p)
    from aiayn.serve.config import ServeConfig

    for name, (default, text) in ServeConfig.flags().items():
        p.add_argument(
            "--" + name.replace("_", "-"), type=type(default), default=default, help=text
        )
    p.set_defaults(func=cmd_serve)
    _add_interop_parsers(sub)
    return parser


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and ``--debug`` on the main command and every subcommand
    (a subcommand's default is SUPPRESS, so ``aiayn --debug CMD`` is not overwritten)."""

    def __init__(self, *args, debug_default=argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument(
            "--debug",
            action="store_true",
            default=debug_default,
            help="show the Python traceback of an error (also AIAYN_DEBUG=1)",
        )

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _first_line(text: str, limit: int = 400) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit] + "..."


def _report(error: BaseException, command: str) -> int:
    """One line on stderr for ``error``; the exit status."""
    prefix = f"aiayn {command}"
    if isinstance(error, TrainingInterrupted):
        print(f"{prefix}: {error}", file=sys.stderr)
        return 128 + error.signal_number
    if isinstance(error, KeyboardInterrupt):
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    if isinstance(error, UnicodeError):  # a decode the code did not attribute to a file
        message = f"text that is not UTF-8 ({_first_line(str(error))}); rerun with --debug"
    elif isinstance(error, (UserError, ValueError, ArithmeticError)):
        message = str(error).strip()
    elif isinstance(error, OSError):
        message = describe_os_error(error)
    elif isinstance(error, RuntimeError):
        message = _first_line(str(error))
    elif isinstance(error, MemoryError):
        message = "out of memory; use a smaller batch (train.max_tokens) or model"
    else:
        print(
            f"{prefix}: internal error: {type(error).__name__}: {_first_line(str(error))} "
            "(rerun with --debug for the traceback, and please report it)",
            file=sys.stderr,
        )
        return 1
    print(f"{prefix}: error: {message}", file=sys.stderr)
    return 2


def _quiet_broken_pipe() -> int:
    """stdout's reader went away (``| head``): stop quietly, as a SIGPIPE'd tool does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
    except (OSError, ValueError, AttributeError):
        pass
    return 128 + 13  # SIGPIPE


def _print_warning(message, category, filename, lineno, file=None, line=None, command="") -> None:
    print(f"aiayn {command}: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, or a bad flag (one line on stderr already)
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    args.argv = list(sys.argv[1:] if argv is None else argv)
    debug = getattr(args, "debug", False) or os.environ.get("AIAYN_DEBUG", "") not in ("", "0")
    with warnings.catch_warnings():
        warnings.showwarning = lambda *w, **k: _print_warning(*w, **k, command=args.command)
        try:
            args.func(args)
            sys.stdout.flush()
        except BrokenPipeError:
            return _quiet_broken_pipe()
        except BaseException as error:
            if debug or isinstance(error, SystemExit):
                raise
            if not isinstance(error, Exception | KeyboardInterrupt):
                raise
            return _report(error, args.command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
