"""Which int8 product is faster, fbgemm's or oneDNN's? Times PyTorch's dynamic int8 linear
(``quantized::linear_dynamic``) packed for each engine, on every distinct weight shape of the
model's int8 layers (encoder, decoder, output projection), from a decoding step's few rows to
an encoder batch's thousands. Each pair is timed alternately, CPU time, one thread, the
weight hot in cache (inside a decoding step it is not, and the two engines alternate: what the
choice gains there is measured by ``bench/experiments/ab_decode.py --mode throughput --int8``).

    python bench/experiments/int8_kernels.py [MODEL_DIR] [--rows 1,4,8,16,32,48,64,131,2400]

oneDNN multiplies on AMX tiles where the CPU has them (``amx_int8``); without them the
comparison still runs (oneDNN on AVX-512 VNNI or AVX2) but ``aiayn.model.quantize`` keeps
fbgemm there. Prints fbgemm's time over oneDNN's per shape and row count (above 1: oneDNN
faster) and the output entries (rows x output features) from which oneDNN wins on every
shape; appends a record to bench/results/int8_kernels.jsonl.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
from linear_layout import model_and_rows, speedup  # noqa: E402

from aiayn.model.quantize import ONEDNN_FROM, Int8Linear, _pack, amx_int8  # noqa: E402
from aiayn.modeldir import load_model_dir  # noqa: E402
from common import write_result  # noqa: E402


def fbgemm_over_onednn(n: int, in_features: int, fbgemm, onednn) -> float:
    """fbgemm's CPU time over oneDNN's for one product of ``n`` rows."""
    x = torch.randn(n, in_features)
    linear_dynamic = torch.ops.quantized.linear_dynamic
    return speedup(
        partial(linear_dynamic, x, fbgemm, True),
        partial(linear_dynamic, x, onednn, False),
        calls=max(10, 3000 // n),
    )


def main() -> None:
    model_dir, rows = model_and_rows("1,4,8,16,32,48,64,131,2400")
    model = load_model_dir(model_dir, quantize="int8")
    layers = [m for m in model.modules() if isinstance(m, Int8Linear)]
    packs = {
        (m.out_features, m.in_features): (
            m._packed,
            _pack(m.weight, m.weight_scale, m.bias, "onednn"),
        )
        for m in layers
    }
    ratios: dict[str, dict[int, float]] = {}
    crossover: dict[str, int | None] = {}
    with torch.no_grad():
        for (out_features, in_features), (fbgemm, onednn) in sorted(packs.items()):
            name = f"{out_features}x{in_features}"
            ratios[name] = {}
            for n in rows:
                ratios[name][n] = fbgemm_over_onednn(n, in_features, fbgemm, onednn)
            wins = [n for n in rows if all(ratios[name][m] >= 1 for m in rows if m >= n)]
            crossover[name] = wins[0] * out_features if wins else None
            print(f"{name}: " + ", ".join(f"{n} rows {r:.2f}x" for n, r in ratios[name].items()))
    print(f"oneDNN from {ONEDNN_FROM} output entries; AMX int8 on this CPU: {amx_int8()}")
    print("oneDNN at least as fast from (rows x out, on the rows timed):", crossover)
    path = write_result(
        "int8_kernels",
        {
            "rows": rows,
            "amx_int8": amx_int8(),
            "onednn_from": ONEDNN_FROM,
            "fbgemm_over_onednn": ratios,
            "onednn_wins_from_outputs": crossover,
        },
    )
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
