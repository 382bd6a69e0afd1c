"""``params``, ``average`` and ``quantize``: presets and model directories."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aiayn.cli.args import fresh_output, int_range
from aiayn.config import ModelConfig
from aiayn.errors import UserError

FAMILIES = ["encoder-decoder", "encoder-only", "decoder-only"]


def add_params(sub) -> None:
    p = sub.add_parser("params", help="print a per-component parameter table of a preset")
    p.add_argument("preset", choices=list(ModelConfig.PRESETS))
    p.add_argument("--family", default="encoder-decoder", choices=FAMILIES)
    p.set_defaults(func=cmd_params)


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


def add_average(sub) -> None:
    p = sub.add_parser("average", help="average the last K checkpoints into a model directory")
    p.add_argument("run_dir")
    p.add_argument("--last", type=int_range(1), default=5, help="how many checkpoints (>= 1)")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--fp16", action="store_true", help="store the weights in float16 (half size)")
    p.add_argument(
        "--include-diverged",
        action="store_true",
        help="also average the checkpoints a run that diverged set aside "
        "(checkpoint-STEP.diverged.pt; skipped by default)",
    )
    p.add_argument(
        "--force", action="store_true", help="replace the model directory --out holds, whole"
    )
    p.set_defaults(func=cmd_average)


def cmd_average(args: argparse.Namespace) -> None:
    import torch

    from aiayn.fileio import replace_directory
    from aiayn.model import build_model
    from aiayn.modeldir import provenance, save_trained_model
    from aiayn.modeldir.tokenizer_files import load_tokenizer
    from aiayn.train import checkpoint as ckpt
    from aiayn.train.tasks import make_task

    run_dir = Path(args.run_dir)
    out = fresh_output(Path(args.out), args.force, keep=[run_dir])
    paths, skipped = _checkpoints_to_average(run_dir / "checkpoints", args)
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
    diverged = [p.name for p in paths if p.name.endswith(ckpt.DIVERGED_SUFFIX)]
    record = provenance.averaged_weights(
        [(p.name, ckpt.checkpoint_step(p)) for p in paths], str(run_dir), diverged
    )
    record = provenance.stored_as(record, "float16" if args.fp16 else None)
    extra = {provenance.KEY: record, **task.saved_extra()}
    dtype = torch.float16 if args.fp16 else None
    with replace_directory(out, args.force, keep=[run_dir]) as new:
        save_trained_model(new, model.eval(), tokenizer, run, dtype=dtype, extra=extra)
    if skipped:
        names = ", ".join(p.name for p in skipped)
        print(
            f"aiayn average: skipped {len(skipped)} checkpoint(s) set aside as saved while the "
            f"run diverged: {names} (--include-diverged averages them too)",
            file=sys.stderr,
        )
    print(f"wrote {args.out}: {provenance.describe({provenance.KEY: record})}")


def _checkpoints_to_average(directory: Path, args: argparse.Namespace):
    """(the last ``--last`` checkpoints of ``directory``, the ones set aside as diverged that
    were left out); those set aside count only with ``--include-diverged``."""
    from aiayn.train import checkpoint as ckpt

    good, diverged = ckpt.list_checkpoints(directory), ckpt.list_diverged(directory)
    if args.include_diverged:
        good, diverged = sorted(good + diverged, key=ckpt.checkpoint_step), []
    if not good:
        aside = (
            f" (only {len(diverged)} set aside as saved while the run diverged: "
            "--include-diverged averages them)"
            if diverged
            else ""
        )
        raise UserError(f"{directory}: no checkpoints to average{aside}")
    return good[-args.last :], diverged


def add_quantize(sub) -> None:
    p = sub.add_parser("quantize", help="write an int8 copy of a model directory")
    p.add_argument("model_dir")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--method", default="int8", choices=["int8"])
    p.add_argument(
        "--keep-output-float",
        action="store_true",
        help="keep the projection to the vocabulary in float32",
    )
    p.add_argument(
        "--force", action="store_true", help="replace the model directory --out holds, whole"
    )
    p.set_defaults(func=cmd_quantize)


def cmd_quantize(args: argparse.Namespace) -> None:
    from aiayn.model.quantize import quantize
    from aiayn.modeldir import WEIGHTS_FILE, ModelDir, provenance, save_quantized

    src, out = Path(args.model_dir), Path(args.out)
    fresh_output(out, args.force, keep=[src])
    directory = ModelDir(src)
    model = directory.model()
    if getattr(model, "quantization", None):
        raise UserError(f"{src} is already quantized ({model.quantization['method']})")
    model = quantize(model, args.method, include_output=not args.keep_output_float)
    # run.json says which weights the copy holds: the source's, quantized
    record = provenance.quantized(directory.run.get(provenance.KEY), model.quantization, src)
    run = {**directory.run, provenance.KEY: record}
    save_quantized(src, out, model, force=args.force, run=run)
    size = (out / WEIGHTS_FILE).stat().st_size / 2**20
    print(f"wrote {args.method} model to {out} ({size:.1f} MiB of weights)")
