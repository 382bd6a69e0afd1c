"""Checks shared by the config dataclasses: each raises ``UserError`` naming the field and
what is allowed."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from aiayn.errors import UserError


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}"
        raise UserError(f"{name} must be >= {low}{upper}, got {value}")


def _check_float(name: str, value: Any, low: float, high: float, high_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise UserError(f"{name} must be a number, got {value!r}")
    too_high = value >= high if high_open else value > high
    if value < low or too_high:
        bracket = ")" if high_open else "]"
        raise UserError(f"{name} must be in [{low}, {high}{bracket}, got {value}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UserError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def from_dict(cls, data: dict[str, Any], where: str = ""):
    """Build dataclass ``cls`` from ``data``; unknown keys raise ``ValueError`` naming them."""
    if not isinstance(data, dict):
        raise UserError(
            f"{where or cls.__name__} must be a table of keys, got {type(data).__name__}"
        )
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        prefix = f"{where}." if where else ""
        raise UserError(
            f"unknown key(s) {', '.join(prefix + k for k in unknown)} for {cls.__name__}; "
            f"allowed: {', '.join(sorted(names))}"
        )
    return cls(**data)
