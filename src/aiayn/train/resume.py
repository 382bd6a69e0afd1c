"""What a run directory already holds, checked before a training starts or resumes in it.

The last checkpoint, the run config it (or run.json) was made with, the tokenizer of a run that
saved no checkpoint yet, and the weights of a model a run starts from (``train.init_from``).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from aiayn.config import FINE_TUNE_KEYS, RunConfig
from aiayn.errors import UserError
from aiayn.fileio import read_json_object
from aiayn.modeldir.tokenizer_files import remove_tokenizer, tokenizer_file
from aiayn.train import checkpoint as ckpt


def check_case_folding(run: RunConfig, tokenizer, source: str) -> None:
    """A model started from another keeps its tokenizer: ``data.lowercase`` must match it."""
    folds = tokenizer.folds_case
    if folds != run.data.lowercase:
        raise ValueError(
            f"the tokenizer of train.init_from {source} {'folds' if folds else 'keeps'} "
            f"case, but data.lowercase = {str(run.data.lowercase).lower()}; "
            f"set data.lowercase = {str(folds).lower()} (the tokenizer cannot change)"
        )


def load_last(existing: list[Path]) -> dict | None:
    """The state of the last of the ``existing`` checkpoints (None if there is none)."""
    if not existing:
        return None
    try:
        return ckpt.load_checkpoint(existing[-1])
    except UserError as e:
        if len(existing) < 2:
            raise
        raise UserError(
            f"{e}; to resume from the checkpoint before it, {existing[-2].name}, "
            f"move {existing[-1].name} out of the way"
        ) from None


def saved_run(out_dir: Path) -> dict | None:
    """The run config in ``out_dir``/run.json, or None if there is none."""
    path = out_dir / "run.json"
    return read_json_object(path, "run config") if path.is_file() else None


def check_same_run(run: RunConfig, out_dir: Path, existing: list[Path], state: dict | None) -> None:
    """Refuse to resume a run whose model or data config has changed.

    The run config stored in the last checkpoint decides (run.json if an older checkpoint
    has none); a key missing from an older config counts as its default value.
    """
    if not existing:
        return
    old = state.get("run") if state else None
    where = f"its last checkpoint {existing[-1].name}"
    if not isinstance(old, dict):
        old, where = saved_run(out_dir), "run.json"
    else:
        check_run_json(out_dir, existing[-1])
    if old is None:
        return
    old = json.loads(json.dumps(old))  # tuples as lists, as in run.json
    new = json.loads(json.dumps(run.to_dict()))
    defaults = json.loads(json.dumps(RunConfig().to_dict()))
    for section in ("model", "data"):
        saved = old.get(section) if isinstance(old.get(section), dict) else {}
        before = {**defaults[section], **saved}
        diff = sorted(k for k, v in new[section].items() if before.get(k) != v)
        if diff:
            shown = ", ".join(f"{k} {before.get(k)!r} -> {new[section][k]!r}" for k in diff)
            raise UserError(
                f"{out_dir} holds a run with a different [{section}] config "
                f"(by {where}; differs in: {shown}); resume it with its own settings, "
                "or use a new output directory to start afresh"
            )


def check_run_json(out_dir: Path, checkpoint: Path) -> None:
    """A damaged run.json is rewritten from the run config of the checkpoint resumed,
    and the user told so (it may have been edited by hand)."""
    try:
        saved_run(out_dir)
    except UserError as e:
        warnings.warn(
            f"{e}; rewriting it from the run config stored in {checkpoint.name}",
            stacklevel=3,
        )


TOKENIZER_KEYS = (
    "task", "corpus", "src_lang", "tgt_lang", "extra_train", "tokenizer", "vocab_size",
    "lowercase",
)  # fmt: skip


def drop_outdated_tokenizer(run: RunConfig, out_dir: Path) -> None:
    """A run that saved no checkpoint yet keeps its tokenizer only if the settings that
    made it are unchanged; otherwise it is trained again (nothing else depends on it)."""
    old = saved_run(out_dir)
    if old is None:
        return
    new = run.to_dict()
    before = {**RunConfig().to_dict()["data"], **(old.get("data") or {})}
    diff = [k for k in TOKENIZER_KEYS if json.dumps(before.get(k)) != json.dumps(new["data"][k])]
    if (old.get("train") or {}).get("init_from", "") != new["train"]["init_from"]:
        diff.append("train.init_from")
    if diff:
        path = tokenizer_file(out_dir)
        warnings.warn(
            f"{path}: made with other settings ({', '.join(diff)} changed) and no "
            "checkpoint uses it yet: building it again",
            stacklevel=2,
        )
        remove_tokenizer(out_dir)


def init_from(model, model_config, directory: Path) -> list[str]:
    """Load into ``model`` the weights of the model directory ``directory`` (fine-tuning, or
    continuing a model); returns the names of the parameters left fresh."""
    from aiayn.modeldir import load_model_dir

    source = load_model_dir(directory)
    mine, theirs = model_config.to_dict(), source.config.to_dict()
    diff = sorted(k for k, v in mine.items() if theirs[k] != v and k not in FINE_TUNE_KEYS)
    if diff:
        raise ValueError(
            f"train.init_from={directory}: its model config differs from this run's in "
            f"{', '.join(diff)}"
        )
    state = model.state_dict()
    shared = {
        k: v for k, v in source.state_dict().items() if k in state and v.shape == state[k].shape
    }
    model.load_state_dict(shared, strict=False)
    return sorted(set(state) - set(shared))  # e.g. a new classifier head
