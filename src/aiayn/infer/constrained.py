"""Lexically constrained beam search: every output holds given token sequences.

Positive constraints (Hokamp & Liu 2017) with dynamic beam allocation (Post & Vilar 2018),
batched as Hu et al. 2019 do: each hypothesis knows how far it is into its sentence's
constraints (``Constraints``, a state per hypothesis kept on the host beside the beam, never
in the model); at each step the candidates are the best 2K of the sentence, each hypothesis's
best next token (and its best that ends the word before it: a term just placed may then stay
a whole word) and every token that starts or continues a constraint it has not met; the K
survivors are shared out among banks by the number of constraint tokens met, round robin
from the fullest bank down, so hypotheses that placed a term are not crowded out by those that
have not (and the reverse). A hypothesis may end (eos) only once it holds every constraint;
at the length limit the live ones end as they are, and each result names the constraints it
does not hold (``Hypothesis.unmet``); a hypothesis holding them all ranks first.

The loop, the finished hypotheses and the live tokens are ``aiayn.infer.beam``'s: only the
selection differs, and a search without constraints is the plain ``beam_search``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from aiayn.config import BOS, EOS
from aiayn.infer import beam as plain
from aiayn.infer.beam import decoder_search
from aiayn.infer.beam_state import (
    Hypothesis,
    Picks,
    ReorderFn,
    SearchShape,
    StepFn,
    length_penalty,
    run_search,
)
from aiayn.infer.mode import decoding

State = tuple[int, int, int, int]  # (met, inside, depth, closing): see ``Constraints``
START: State = (0, 0, 0, 0)


class Constraints:
    """One sentence's constraints (token sequences, in any order, each to appear once) and the
    moves of a hypothesis's state through them.

    A state is (met, inside, depth, closing): the constraints met (a bit each), the
    constraints whose first ``depth`` tokens the hypothesis has just generated (several when
    they share those tokens, as a trie's node would), that depth, and the constraint just
    completed (its bit, or 0). A token that continues none of those begun abandons them
    (their progress is lost; the longest end of what was read that begins a constraint
    goes on, as KMP's failure links do) and may start another; two equal constraints are two
    to meet. A constraint is a whole word: if the token after it is one of ``inword`` (the
    pieces that go on with a word, "ed" after "hazard"), it is not met after all. Moves are
    cached: a sentence sees few distinct states."""

    def __init__(self, sequences: Sequence[Sequence[int]], inword: frozenset[int] = frozenset()):
        self.seqs = [tuple(s) for s in sequences if len(s)]
        self.inword = inword
        self.all = (1 << len(self.seqs)) - 1
        self._moves: dict[tuple[State, int], State] = {}
        self._wanted: dict[State, tuple[int, ...]] = {}

    def __len__(self) -> int:
        return len(self.seqs)

    def move(self, state: State, token: int) -> State:
        key = (state, token)
        new = self._moves.get(key)
        if new is None:
            new = self._moves[key] = self._move(state, token)
        return new

    def _move(self, state: State, token: int) -> State:
        met, inside, depth, closing = state
        if closing and token in self.inword:  # the word goes on: not the constraint's word
            met &= ~closing
        moved = self._continue((met, inside, depth), token)
        if moved is None:
            moved = self._fall_back((met, inside, depth), token)
        return (*moved, moved[0] & ~met)  # closing: the constraint this token completed

    def _fall_back(self, state: tuple[int, int, int], token: int) -> tuple[int, int, int]:
        """The tokens read inside constraints, then ``token``, fell out of them: the longest
        end of them that begins an unmet constraint goes on."""
        met, inside, depth = state
        c = self._bits(inside)[0]
        tail = self.seqs[c][:depth] + (token,)
        for start in range(1, len(tail) + 1):
            st: tuple[int, int, int] | None = (met, 0, 0)
            for t in tail[start:]:
                st = self._continue(st, t)
                if st is None:
                    break
            if st is not None:
                return st
        return (met, 0, 0)

    def _continue(self, state: tuple[int, int, int], token: int) -> tuple[int, int, int] | None:
        """``state`` after ``token`` if it continues a constraint begun (or, outside one,
        begins an unmet one); None if it falls out."""
        met, inside, depth = state
        if inside:
            on = [c for c in self._bits(inside) if self.seqs[c][depth] == token]
        else:
            on = [c for c in self._bits(self.all & ~met) if self.seqs[c][0] == token]
        if not on:
            return None if inside else (met, 0, 0)
        whole = [c for c in on if len(self.seqs[c]) == depth + 1]
        if whole:  # a constraint complete: met, and the hypothesis starts afresh
            return (met | 1 << whole[0], 0, 0)
        return (met, sum(1 << c for c in on), depth + 1)

    def strands(self, state: State, new: State, banned: frozenset[int]) -> bool:
        """Whether moving from ``state`` to ``new`` leaves a constraint half written after a
        token of ``banned`` (a placeholder's "<" with no "x/>" after it): such a token
        stands only inside its constraint."""
        met, inside, depth, _ = state
        if not inside or not any(t in banned for t in self.seqs[self._bits(inside)[0]][:depth]):
            return False
        return not (new[0] & ~met or new[2] == depth + 1)

    def wanted(self, state: State) -> tuple[int, ...]:
        """The tokens that take a hypothesis in ``state`` further into a constraint."""
        out = self._wanted.get(state)
        if out is None:
            met, inside, depth, _ = state
            nxt = {self.seqs[c][depth] for c in self._bits(inside)}
            nxt |= {self.seqs[c][0] for c in self._bits(self.all & ~met)}
            out = self._wanted[state] = tuple(sorted(nxt))
        return out

    def bank(self, state: State) -> int:
        """Constraint tokens met: the whole met constraints' and the depth into one."""
        met, _, depth, _ = state
        return sum(len(self.seqs[c]) for c in self._bits(met)) + depth

    def unmet(self, state: State) -> tuple[int, ...]:
        return tuple(self._bits(self.all & ~state[0]))

    def _bits(self, mask: int) -> list[int]:
        return [c for c in range(len(self.seqs)) if mask >> c & 1]


class Banks:
    """The constrained search's selection (dynamic beam allocation): all candidates scored
    on the device and read back in one table with the plain search's; chosen on the host,
    where each hypothesis's constraint state is kept (N, K)."""

    def __init__(
        self,
        shape: SearchShape,
        constraints: list[Constraints],
        inword: frozenset[int],
        banned: Sequence[frozenset[int]] | None = None,
    ):
        self.shape, self.sets, self.inword = shape, list(constraints), inword
        self.states = [[START] * shape.k for _ in self.sets]  # (N, K)
        self._mask: Tensor | None = None
        self.banned = list(banned) if banned is not None and any(banned) else None
        self._ban: Tensor | None = None  # (N, V) True: only as a constraint's next token

    def _ban_mask(self, v: int) -> Tensor:
        """(N, V) True where a sentence's token may come only as part of its constraints."""
        if self._ban is None:
            ban = torch.zeros(len(self.sets), v, dtype=torch.bool)
            for row, tokens in enumerate(self.banned or ()):
                ban[row, [t for t in tokens if t < v]] = True
            self._ban = ban.to(self.shape.device)
        return self._ban

    def _inword_mask(self, v: int) -> Tensor:
        """(V,) True where a token goes on with a word (``inword``)."""
        if self._mask is None:
            mask = torch.zeros(v, dtype=torch.bool)
            mask[[t for t in self.inword if t < v]] = True
            self._mask = mask.to(self.shape.device)
        return self._mask

    def __call__(
        self, logp: Tensor, log_probs: Tensor, limit: Tensor, spans: np.ndarray, length: int
    ) -> Picks:
        s = self.shape
        k, n, v = s.k, log_probs.size(0), logp.size(-1)
        wanted = [
            [c.wanted(st) for st in row] for c, row in zip(self.sets, self.states, strict=True)
        ]
        m = max((len(w) for row in wanted for w in row), default=0)
        cand = log_probs[:, :, None] + logp.view(n, k, v)  # (N, K, V)
        free = cand  # the candidates outside constraints: a banned token is none
        if self.banned is not None:
            free = cand.masked_fill(self._ban_mask(v)[:, None, :], float("-inf"))  # (N, K, V)
        top_scores, top_index = free.view(n, k * v).topk(min(2 * k, k * v), dim=1)  # (N, 2K)
        bests = [free.max(2)]  # each hypothesis's best token, (N, K) scores and tokens
        if self.inword:  # and its best that ends the word before it (after a constraint)
            bests.append(free.masked_fill(self._inword_mask(v), float("-inf")).max(2))
        columns = [top_scores, top_index, *(x for b in bests for x in b)]
        if m:  # each hypothesis's constraint tokens (repeated to M: duplicates are dropped)
            table = np.array([[(w + w[-1:] * m)[:m] if w else (s.eos_id,) * m for w in row]
                              for row in wanted], dtype=np.int64)  # (N, K, M)  # fmt: skip
            index = torch.from_numpy(table).to(s.device, non_blocking=True).view(n * k, m)
            columns.append(cand.view(n * k, v).gather(1, index).view(n, k * m))  # (N, K*M)
        host = plain.to_host(torch.cat([c.double() for c in columns], 1))  # the one transfer
        c2 = top_index.size(1)
        top_host, top_at = host[:, :c2], host[:, c2 : 2 * c2].astype(np.int64)
        at = 2 * c2
        best = []  # (N, K) scores and tokens of each kind of best
        for _ in bests:
            best.append((host[:, at : at + k], host[:, at + k : at + 2 * k].astype(np.int64)))
            at += 2 * k
        wanted_host = host[:, at:].reshape(n, k, m)

        live = np.full((n, k), float("-inf"))  # (N, K)
        parent_at = np.zeros((n, k), dtype=np.int64)
        token_at = np.full((n, k), s.eos_id, dtype=np.int64)  # no hypothesis: reads eos
        states, ends = [], []
        for row in range(n):
            found: dict[tuple[int, int], float] = {}  # (parent beam, token) -> log P
            for score, flat in zip(top_host[row], top_at[row], strict=True):
                found.setdefault((int(flat // v), int(flat % v)), float(score))
            for j in range(k):
                for scores, tokens in best:
                    found.setdefault((j, int(tokens[row, j])), float(scores[row, j]))
                for w, t in enumerate(wanted[row][j]):
                    found.setdefault((j, t), float(wanted_host[row, j, w]))
            picked, finishing = self._choose(row, found)
            row_states = [START] * k
            for slot, (score, j, t, state) in enumerate(picked):
                live[row, slot], parent_at[row, slot], token_at[row, slot] = score, j, t
                row_states[slot] = state
            states.append(row_states)
            ends += [(row, j, score, unmet) for score, j, unmet in finishing]
        self.states = states
        first_row = np.arange(n)[:, None] * k
        to_device = lambda a: torch.from_numpy(a).to(s.device, non_blocking=True)  # noqa: E731
        reachable = None
        if s.alpha >= 0:  # a live log-probability only falls: its best is logP / lp(limit)
            reachable = live.max(1) / length_penalty(s.horizon(spans, length) + s.p, s.alpha)
        return Picks(
            to_device(live.astype(np.float32)), to_device(first_row + parent_at),
            to_device(token_at), live, parent_at, token_at, ends, reachable,
        )  # fmt: skip

    def _choose(self, row: int, found: dict[tuple[int, int], float]):
        """Sentence ``row``'s K survivors as (log P, parent beam, token, state), banked, and
        its finishing eos candidates as (log P, parent beam, unmet): those holding every
        constraint, or, where nothing but eos is possible, those that do not."""
        k, eos, cons, states = self.shape.k, self.shape.eos_id, self.sets[row], self.states[row]
        banned = self.banned[row] if self.banned is not None else frozenset()
        ranked = sorted(found.items(), key=lambda x: -x[1])
        going, done_bank, stuck = [], [], []  # done_bank: candidates holding every constraint
        for (j, t), score in ranked:
            if score == float("-inf"):
                continue
            if t == eos:
                if states[j][0] == cons.all:
                    done_bank.append((score, j, True))
                else:
                    stuck.append((score, j, cons.unmet(states[j])))
                continue
            state = cons.move(states[j], t)
            if banned and cons.strands(states[j], state, banned):
                continue
            going.append((score, j, t, state))
            if state[0] == cons.all:
                done_bank.append((score, j, False))
        finishing = [(score, j, ()) for score, j, is_eos in done_bank[:k] if is_eos]
        if not going and not finishing:  # nothing else possible: end without the constraints
            finishing = stuck[:k]
        if not len(cons):
            return going[:k], finishing
        seen: dict[int, int] = {}  # bank -> candidates ranked in it so far
        keyed = []
        for order, cand in enumerate(going):
            bank = cons.bank(cand[3])
            rank = seen.get(bank, 0)
            seen[bank] = rank + 1
            keyed.append(((rank, -bank, order), cand))
        keyed.sort(key=lambda x: x[0])
        return [cand for _, cand in keyed[:k]], finishing

    def keep(self, rows: np.ndarray) -> None:
        self.sets = [self.sets[r] for r in rows]
        self.states = [self.states[r] for r in rows]
        if self.banned is not None:
            self.banned = [self.banned[r] for r in rows]
            self._ban = None

    def unmet(self, row: int, j: int) -> tuple[int, ...]:
        return self.sets[row].unmet(self.states[row][j])


@decoding
def constrained_beam_search(
    step: StepFn,
    reorder: ReorderFn,
    batch_size: int,
    beam: int,
    max_len: Tensor,
    constraints: Sequence[Sequence[Sequence[int]]] | None,
    alpha: float = 0.6,
    nbest: int = 1,
    device: torch.device | str = "cpu",
    early_stop: bool = False,
    bos_id: int = BOS,
    eos_id: int = EOS,
    prefix: list[list[int]] | None = None,
    prefix_log_prob: Tensor | None = None,
    on_tokens: Callable[[np.ndarray], None] | None = None,
    inword: frozenset[int] = frozenset(),
    banned: Sequence[frozenset[int]] | None = None,
) -> list[list[Hypothesis]]:
    """``aiayn.infer.beam.beam_search`` whose outputs hold ``constraints``: per sentence, a
    list of token sequences (none, or empty ones: unconstrained) to appear in the output, each
    once, in any order, after the prefix if there is one, as whole words: not followed by a
    token of ``inword`` (``Constraints``). Each hypothesis's ``unmet`` names the constraints
    (their indices in the sentence's list) it does not hold: empty unless the length limit
    came first. ``banned`` (per sentence): tokens it may write only as the next token of one
    of its constraints (a placeholder's "%" nowhere else). Without constraints this is
    ``beam_search`` itself, tokens and scores."""
    sets = [Constraints(c, inword) for c in constraints] if constraints else []
    if len(sets) not in (0, batch_size):
        raise ValueError(f"{len(sets)} constraint lists for {batch_size} sentences")
    if not any(len(c) for c in sets):
        return plain.beam_search(
            step, reorder, batch_size, beam, max_len, alpha, nbest, device, early_stop, bos_id,
            eos_id, prefix, prefix_log_prob, on_tokens,
        )  # fmt: skip
    shape = SearchShape(beam, alpha, early_stop, len(prefix[0]) if prefix else 0, eos_id, device)
    return run_search(
        step, reorder, Banks(shape, sets, inword, banned), shape, batch_size, max_len, nbest,
        bos_id, prefix, prefix_log_prob, on_tokens,
    )  # fmt: skip


@decoding
def constrained_decode(
    model,
    src: Tensor,
    constraints: Sequence[Sequence[Sequence[int]]] | None,
    beam: int = 4,
    alpha: float = 0.6,
    max_len_offset: int = 50,
    nbest: int = 1,
    early_stop: bool = False,
    prefix: Tensor | None = None,
    inword: frozenset[int] = frozenset(),
    banned: Sequence[frozenset[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Constrained beam search over an encoder-decoder for sources (B, S) (as
    ``aiayn.infer.beam.beam_decode``): per sentence, the token sequences its outputs hold,
    as whole words (``inword``: the tokens that go on with a word)."""
    config = model.config
    d = decoder_search(model, src, beam, max_len_offset, prefix)
    return constrained_beam_search(
        d.step, d.reorder, src.size(0), beam, d.max_len, constraints, alpha, nbest, src.device,
        early_stop, config.bos_id, config.eos_id, d.prefix, d.prefix_log_prob, d.on_tokens,
        inword, banned,
    )  # fmt: skip
