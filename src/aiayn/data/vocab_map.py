"""How the ids of an imported vocabulary map onto aiayn's.

aiayn fixes its special ids (pad 0, unk 1, bos 2, eos 3, mask 4; ``aiayn.data.tokenizer``) and
every model, loss and search relies on them. A vocabulary from elsewhere (a Hugging Face
tokenizer) has its own ids, so an imported model sees it permuted: the tokens that play the
five roles move to ids 0-4 and every other token follows in its original order. A role the
original vocabulary has no token for gets an extra row: its embedding starts as zeros (or as
a copy of another token's row, e.g. GPT-2's ``<|endoftext|>`` serving as both bos and eos) and
its output logit is -inf, so the model never produces it and the softmax over the real ids is
the original one.

The same map, read backwards, takes the ids (and the weight rows) back: export drops the
extra rows, so the original vocabulary comes back unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from torch import Tensor

from aiayn.data.tokenizer import VOCAB_MAP_FILE
from aiayn.fileio import write_json

ROLES = ("pad", "unk", "bos", "eos", "mask")  # aiayn ids 0..4


@dataclass(frozen=True)
class VocabMap:
    """``their_size`` original ids; ``specials[k]``: the original id of aiayn id k (role
    ``ROLES[k]``), or None where the original has no such token; ``copies``: aiayn id ->
    the original id whose embedding an extra row starts from. ``backend`` names the
    tokenizer that reads the original ids ("tokenizers" or "marian")."""

    their_size: int
    specials: tuple[int | None, ...]
    copies: dict[int, int] = field(default_factory=dict)
    backend: str = "tokenizers"

    def __post_init__(self) -> None:
        object.__setattr__(self, "specials", tuple(self.specials))
        object.__setattr__(self, "copies", {int(k): int(v) for k, v in self.copies.items()})
        if len(self.specials) != len(ROLES):
            raise ValueError(
                f"a vocabulary map names {len(ROLES)} special ids, got {self.specials}"
            )
        real = [s for s in self.specials if s is not None]
        if len(set(real)) != len(real) or any(not 0 <= s < self.their_size for s in real):
            raise ValueError(
                f"special ids {self.specials} must be distinct ids below {self.their_size}"
            )
        for ours, theirs in self.copies.items():
            if self.specials[ours] is not None or not 0 <= theirs < self.their_size:
                raise ValueError(f"copy {ours} <- {theirs}: not an extra row of a known id")

    @cached_property
    def source_ids(self) -> list[int]:
        """The original id of each aiayn id; -1 for an extra row."""
        taken = {s for s in self.specials if s is not None}
        rest = [j for j in range(self.their_size) if j not in taken]
        return [-1 if s is None else s for s in self.specials] + rest

    @property
    def size(self) -> int:
        """aiayn's vocabulary size: the original's plus the extra rows."""
        return self.their_size + sum(s is None for s in self.specials)

    @property
    def extras(self) -> list[int]:
        """aiayn ids without an original id (never produced; dropped by export)."""
        return [k for k, s in enumerate(self.specials) if s is None]

    def index(self) -> tuple[Tensor, Tensor]:
        """(ours_to_theirs (V_ours,), theirs_to_ours (V_theirs,)) as long tensors; -1 = none."""
        src = torch.tensor(self.source_ids, dtype=torch.long)
        back = torch.full((self.their_size,), -1, dtype=torch.long)
        real = src >= 0
        back[src[real]] = torch.arange(len(src))[real]
        return src, back

    @cached_property
    def _back(self) -> list[int]:
        return self.index()[1].tolist()

    def to_ours(self, ids: list[int]) -> list[int]:
        back = self._back
        return [back[i] for i in ids]

    def piece(self, token: int, their_piece) -> str:
        """The original piece of aiayn id ``token`` (``their_piece(their id)``), or the role of
        an extra row, e.g. "<pad>"."""
        theirs = self.source_ids[token]
        return their_piece(theirs) if theirs >= 0 else f"<{ROLES[token]}>"

    def to_theirs(self, ids: list[int]) -> list[int]:
        """Original ids of aiayn ids; extra rows have none and are left out."""
        src = self.source_ids
        return [src[i] for i in ids if src[i] >= 0]

    # -- weights ------------------------------------------------------------------------------

    def rows_to_ours(self, weight: Tensor, fill: float = 0.0, copies: bool = True) -> Tensor:
        """Rows (V_theirs, ...) to (V_ours, ...): extra rows are ``fill``, or with ``copies``
        (embedding rows, not output biases) the copies they start from."""
        src = torch.tensor(self.source_ids, dtype=torch.long)
        out = weight.new_full((len(src), *weight.shape[1:]), fill)
        real = src >= 0
        out[real] = weight[src[real]]
        for ours, theirs in self.copies.items() if copies else ():
            out[ours] = weight[theirs]
        return out

    def rows_to_theirs(self, weight: Tensor) -> Tensor:
        """Rows (V_ours, ...) to (V_theirs, ...): extra rows are dropped."""
        back = self.index()[1]
        return weight[back]

    # -- files --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "backend": self.backend,
            "their_size": self.their_size,
            "specials": dict(zip(ROLES, self.specials, strict=True)),
            "copies": {str(k): v for k, v in self.copies.items()},
        }

    @classmethod
    def from_dict(cls, data: dict, where: str = VOCAB_MAP_FILE) -> VocabMap:
        try:
            specials = data["specials"]
            return cls(
                their_size=int(data["their_size"]),
                specials=tuple(specials[role] for role in ROLES),
                copies={int(k): int(v) for k, v in data.get("copies", {}).items()},
                backend=data.get("backend", "tokenizers"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: not a vocabulary map ({e})") from None

    def save(self, directory: Path) -> None:

        write_json(Path(directory) / VOCAB_MAP_FILE, self.to_dict())

    @classmethod
    def load(cls, directory: Path) -> VocabMap:
        path = Path(directory) / VOCAB_MAP_FILE
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: unreadable ({e})") from None
        return cls.from_dict(data, str(path))
