"""Plots: training curves and attention maps (matplotlib, headless)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from aiayn.fileio import atomic_write


def read_metrics(path: Path) -> list[dict]:
    """The records of a metrics.jsonl; lines that are not JSON objects (a write cut short) are
    skipped."""
    records = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def _save_png(fig, png_path, dpi: int) -> None:
    """Write the figure atomically: a failed write leaves no half-written PNG."""

    atomic_write(Path(png_path), lambda p: fig.savefig(p, format="png", dpi=dpi))


def plot_curves(metrics_path: Path, png_path: Path) -> None:
    """Training loss, validation loss and learning rate against optimizer steps."""
    records = read_metrics(metrics_path)
    train = [r for r in records if "loss" in r]
    valid = [r for r in records if "valid_loss" in r]
    fig, (ax_loss, ax_lr) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        ax_loss.plot([r["step"] for r in train], [r["nll"] for r in train], label="train NLL")
        ax_loss.plot(
            [r["step"] for r in train],
            [r["loss"] for r in train],
            label="train loss (label-smoothed)",
            alpha=0.5,
        )
        ax_lr.plot([r["step"] for r in train], [r["lr"] for r in train])
    if valid:
        ax_loss.plot(
            [r["step"] for r in valid], [r["valid_loss"] for r in valid], "o-", label="valid NLL"
        )
    ax_loss.set(xlabel="step", ylabel="nats per target token", title="loss")
    ax_loss.legend()
    ax_loss.grid(alpha=0.3)
    ax_lr.set(xlabel="step", ylabel="learning rate", title="learning rate")
    ax_lr.grid(alpha=0.3)
    fig.tight_layout()
    _save_png(fig, png_path, dpi=100)
    plt.close(fig)


def _heatmap_grid(maps, x_labels, y_labels, title, png_path):
    """maps: list over layers of (H, T_q, T_k) arrays; one row per layer, one column per head."""
    n_layers, n_heads = len(maps), maps[0].shape[0]
    cell = max(2.2, 0.22 * max(len(x_labels), len(y_labels)))
    fig, axes = plt.subplots(
        n_layers, n_heads, figsize=(cell * n_heads + 1, cell * n_layers + 1), squeeze=False
    )
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer][head]
            ax.imshow(maps[layer][head], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(len(x_labels)), x_labels, rotation=90, fontsize=7)
            ax.set_yticks(range(len(y_labels)), y_labels, fontsize=7)
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    _save_png(fig, png_path, dpi=90)
    plt.close(fig)


def _array(weights):
    """Attention weights as a float32 numpy array (from any device and dtype: numpy has no
    bfloat16)."""
    return weights.detach().float().cpu().numpy()


def plot_attention(model, tokenizer, sentence: str, png_path: Path, self_attention: bool = False):
    """Translate ``sentence`` greedily and plot its cross-attention (per layer and head).

    With ``self_attention``, also writes ``*-encoder.png`` and ``*-decoder.png`` beside it.
    Returns the path of the cross-attention PNG.
    """
    from aiayn.infer.attention import translation_attention

    att = translation_attention(model, tokenizer, sentence)
    src_labels, out_labels, in_labels = att.source, att.output, att.decoder_input
    translation = att.translation
    png_path = Path(png_path)
    maps = [_array(w) for w in att.cross]
    _heatmap_grid(
        maps, src_labels, out_labels, f"cross-attention: {sentence} -> {translation}", png_path
    )
    if self_attention:
        stem = png_path.with_suffix("")
        enc = [_array(w) for w in att.encoder]
        _heatmap_grid(enc, src_labels, src_labels, "encoder self-attention", f"{stem}-encoder.png")
        dec = [_array(w) for w in att.decoder_self]
        _heatmap_grid(dec, in_labels, in_labels, "decoder self-attention", f"{stem}-decoder.png")
    return png_path
