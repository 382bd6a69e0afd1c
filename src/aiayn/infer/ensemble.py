"""An ensemble of encoder-decoders that share a vocabulary, decoded as one model: at every step
the members' next-token distributions are averaged (the log of the mean of their
probabilities), as fairseq and OpenNMT-py ensemble the translators of the paper's WMT results.

``Ensemble`` has the interface the searches use (``encode``, ``new_state``, ``decode``,
``config``), so greedy search, beam search, sampling and prefixes run on it unchanged; its
"logits" are the averaged log-probabilities (already normalised: a softmax leaves them as
they are).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from aiayn.errors import UserError


class EnsembleMemory:
    """The members' encoder memories, indexed and repeated together."""

    def __init__(self, parts: list[Tensor]) -> None:
        self.parts = parts

    def repeat_interleave(self, repeats: int, dim: int = 0) -> EnsembleMemory:
        return EnsembleMemory([p.repeat_interleave(repeats, dim=dim) for p in self.parts])

    def __getitem__(self, index) -> EnsembleMemory:
        return EnsembleMemory([p[index] for p in self.parts])


class EnsembleState:
    """The members' decoding states, moved together."""

    def __init__(self, states: list) -> None:
        self.states = states

    @property
    def length(self) -> int:
        return self.states[0].length

    @property
    def offset(self) -> int:
        return self.states[0].offset

    @property
    def tokens_real(self) -> bool:
        return self.states[0].tokens_real

    @tokens_real.setter
    def tokens_real(self, value: bool) -> None:
        for state in self.states:
            state.tokens_real = value

    def reorder(self, index: Tensor, same_sources: bool = False) -> None:
        for state in self.states:
            state.reorder(index, same_sources)


class Ensemble(nn.Module):
    """Encoder-decoders ``members`` decoded as one: per step, log mean_i P_i(y | ...)."""

    def __init__(self, members: list[nn.Module]) -> None:
        super().__init__()
        if len(members) < 2:
            raise UserError(f"an ensemble needs two models or more, got {len(members)}")
        first = members[0].config
        for i, member in enumerate(members[1:], 2):
            config = member.config
            if config.family != "encoder-decoder":
                raise UserError(f"model {i} is {config.family}: an ensemble translates")
            for name in ("target_vocab", "pad_id", "bos_id", "eos_id", "max_len"):
                if getattr(config, name) != getattr(first, name):
                    raise UserError(
                        f"model {i} has {name} {getattr(config, name)}, model 1 "
                        f"{getattr(first, name)}: an ensemble's models share their vocabulary "
                        "and lengths"
                    )
        self.members = nn.ModuleList(members)
        positions = [m.config.max_positions for m in members if m.config.max_positions]
        # the tightest position table of any member bounds the outputs of all
        self.config = first if not positions else first.replace(pos_encoding="learned")

    def encode(self, src: Tensor, attention=None) -> tuple[EnsembleMemory, Tensor]:
        if attention is not None:
            raise UserError("attention maps belong to one model: ask a member of the ensemble")
        outs = [member.encode(src) for member in self.members]
        return EnsembleMemory([memory for memory, _ in outs]), outs[0][1]

    def new_state(self, src_mask: Tensor, beams: int = 1) -> EnsembleState:
        return EnsembleState([member.new_state(src_mask, beams) for member in self.members])

    def decode(
        self,
        tgt: Tensor,
        memory: EnsembleMemory,
        src_mask: Tensor | None = None,
        state: EnsembleState | None = None,
        attention=None,
        select: Tensor | None = None,
        logits: bool = True,
    ) -> Tensor:
        """The members' next-token log-probabilities averaged in probability: (B, T, V), or
        (n, V) at the positions of ``select``."""
        if attention is not None or not logits:
            raise UserError("an ensemble gives averaged log-probabilities only")
        states = state.states if state is not None else [None] * len(self.members)
        outs = [
            member.decode(tgt, part, src_mask, state=s, select=select).float().log_softmax(-1)
            for member, part, s in zip(self.members, memory.parts, states, strict=True)
        ]
        return torch.logsumexp(torch.stack(outs), 0) - math.log(len(outs))

    def forward(self, src: Tensor, tgt: Tensor, attention=None, select=None, logits=True):
        memory, src_mask = self.encode(src, attention)
        return self.decode(tgt, memory, src_mask, select=select, logits=logits)
