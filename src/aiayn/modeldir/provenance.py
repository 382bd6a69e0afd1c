"""Which weights a model directory holds, as its ``run.json`` records them (``"weights"``).

Every model directory aiayn writes says where its weights come from::

    "weights": {"kind": "last", "step": 2400}                         # a run's model/
    "weights": {"kind": "best", "step": 1200, "valid_loss": 3.41}     # a run's best/
    "weights": {"kind": "average", "run": "runs/demo",                # model/ with
                "checkpoints": [{"file": "checkpoint-00002100.pt",   #   train.average_last,
                                 "step": 2100}, ...]}                 #   or `aiayn average`

with ``"dtype": "float16"`` when the weights were stored in half precision, ``"diverged":
true`` on an averaged checkpoint saved while its run diverged (averaged only when asked), and
``"quantized": {"method": "int8", "include_output": true}, "from": SOURCE`` in an int8 copy
of the directory SOURCE (``aiayn quantize``). ``describe`` turns the record into the words ``aiayn evaluate`` and the
training summary print; directories written before the record existed are described from what
they hold instead (a training summary's ``weights``, the checkpoint names ``aiayn average``
listed, the quantization ``config.json`` records).
"""

from __future__ import annotations

from collections.abc import Sequence

KEY = "weights"  # run.json's record of the weights


def last_weights(step: int) -> dict:
    """The weights a training ended with, at ``step``."""
    return {"kind": "last", "step": step}


def best_weights(step: int, **scores: float) -> dict:
    """The weights of the best validation, at ``step``, with its scores (``valid_loss``,
    ``valid_accuracy``)."""
    return {"kind": "best", "step": step, **scores}


def averaged_weights(
    checkpoints: Sequence[tuple[str, int]],
    run: str | None = None,
    diverged: Sequence[str] = (),
) -> dict:
    """The average of ``checkpoints`` ((file name, step) pairs) of the run directory ``run``;
    those named in ``diverged`` were saved while the run diverged."""
    listed = [
        {"file": name, "step": step, **({"diverged": True} if name in diverged else {})}
        for name, step in checkpoints
    ]
    return {"kind": "average", **({"run": run} if run else {}), "checkpoints": listed}


def stored_as(record: dict, dtype: str | None) -> dict:
    """``record`` with the dtype the weights were stored in, when not float32."""
    return {**record, "dtype": dtype} if dtype and dtype != "float32" else record


def quantized(record: dict | None, quantization: dict, source) -> dict:
    """The record of an int8 copy of the model directory ``source``, whose weights ``record``
    describes (None: not recorded)."""
    return {**(record or {}), "quantized": dict(quantization), "from": str(source)}


def describe(run: dict, quantization: dict | None = None) -> str | None:
    """What the weights of a directory with ``run.json`` ``run`` (and, from its config.json,
    ``quantization``) are, in words; None when nothing says."""
    record = run.get(KEY)
    record = record if isinstance(record, dict) else {}
    words = _described(record) or _described_before_the_record(run)
    if words is None and record.get("from"):  # a copy of weights nothing else describes
        words = f"the weights of {record['from']}"
    if words is None:
        return None
    if record.get("dtype"):
        words += f", stored in {record['dtype']}"
    saved = record.get("quantized") or quantization
    if isinstance(saved, dict):
        words += f", quantized to {saved.get('method', 'int8')}"
        if saved.get("include_output") is False:
            words += " (the projection to the vocabulary kept in float32)"
    return words


def _described(record: dict) -> str | None:
    kind, step = record.get("kind"), record.get("step")
    if kind == "last" and isinstance(step, int):
        return f"the last weights (step {step})"
    if kind == "best" and isinstance(step, int):
        scores = "".join(
            f", {key.replace('_', ' ')} {record[key]:.4g}"
            for key in ("valid_loss", "valid_accuracy")
            if isinstance(record.get(key), int | float)
        )
        return f"the weights of the best validation (step {step}{scores})"
    checkpoints = record.get("checkpoints")
    if kind == "average" and isinstance(checkpoints, list) and checkpoints:
        steps = [c.get("step") for c in checkpoints if isinstance(c, dict)]
        words = f"the average of {_checkpoints(len(checkpoints))} (steps {_steps(steps)})"
        if record.get("run"):
            words += f" of {record['run']}"
        diverged = [c.get("step") for c in checkpoints if isinstance(c, dict) and c.get("diverged")]
        if diverged:
            words += f", {_steps(diverged)} saved while the run diverged"
        return words
    return None


def _checkpoints(n: int) -> str:
    return f"{n} checkpoint{'s' if n != 1 else ''}"


def _steps(steps: list) -> str:
    return ", ".join(str(s) for s in steps)


def _described_before_the_record(run: dict) -> str | None:
    """Directories written before ``"weights"`` existed: a training summary's words, or the
    checkpoint names ``aiayn average`` listed."""
    summary = run.get("summary")
    if isinstance(summary, dict) and isinstance(summary.get(KEY), str):
        return summary[KEY]
    averaged = run.get("averaged")
    if isinstance(averaged, list) and averaged:
        return f"the average of {_checkpoints(len(averaged))} ({', '.join(map(str, averaged))})"
    return None
