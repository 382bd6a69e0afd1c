"""Per-component parameter counts, to check a model against the paper's figures by eye."""

from __future__ import annotations

import re
from dataclasses import dataclass

from torch import nn

_LAYER = re.compile(r"^(encoder|decoder)\.layers\.\d+\.(self_attn|cross_attn|ffn|norm\d)")
_PARTS = {
    "self_attn": "self-attention",
    "cross_attn": "cross-attention",
    "ffn": "feed-forward",
}


@dataclass
class Row:
    component: str
    matrices: int = 0  # entries of parameters with two or more dimensions
    vectors: int = 0  # biases and LayerNorm gains/offsets

    @property
    def total(self) -> int:
        return self.matrices + self.vectors


def _component(name: str, family: str) -> str:
    m = _LAYER.match(name)
    if m:
        stack, part = m.groups()
        if family == "decoder-only":
            stack = "decoder"
        return f"{stack} {_PARTS.get(part, 'layer norms')}"
    if name.endswith("token.weight"):
        return "token embeddings"
    if name.endswith("position.weight"):
        return "learned positions"
    if name.startswith(("encoder.norm", "decoder.norm")):
        return "final layer norms"
    if name.startswith("unembed"):
        return "output projection"
    return "task heads"


def parameter_table(model: nn.Module) -> list[Row]:
    """Rows of parameter counts by component; tied parameters are counted once."""
    family = model.config.family
    rows: dict[str, Row] = {}
    for name, p in model.named_parameters():  # yields each shared tensor once
        row = rows.setdefault(_component(name, family), Row(_component(name, family)))
        if p.dim() >= 2:
            row.matrices += p.numel()
        else:
            row.vectors += p.numel()
    return list(rows.values())


def format_table(rows: list[Row], title: str = "") -> str:
    width = max(len(r.component) for r in rows + [Row("total")])
    lines = [title] if title else []
    lines.append(f"{'component':<{width}}  {'matrices':>13}  {'vectors':>10}  {'total':>13}")
    for r in rows:
        lines.append(f"{r.component:<{width}}  {r.matrices:>13,}  {r.vectors:>10,}  {r.total:>13,}")
    total = Row("total", sum(r.matrices for r in rows), sum(r.vectors for r in rows))
    lines.append(
        f"{'total':<{width}}  {total.matrices:>13,}  {total.vectors:>10,}  {total.total:>13,}"
    )
    return "\n".join(lines)
