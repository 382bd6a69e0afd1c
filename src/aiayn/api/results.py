"""What the API returns: small frozen dataclasses, never tuples."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hypothesis:
    """One output sequence: its text, its token ids (ending with eos where one was made),
    its ``score`` (what ranks the n-best list: log P / lp for beam search, Vaswani et al.
    2017 §6.1; the log-probability itself for greedy search and samples) and ``log_prob``,
    its log-probability under the model. ``unmet``: the terms it was asked to hold (a
    glossary's, kept spans, ``constraints``) that it does not, which happens only when the
    length limit came first."""

    text: str
    tokens: tuple[int, ...]
    score: float
    log_prob: float
    unmet: tuple[str, ...] = ()


@dataclass(frozen=True)
class Translation:
    """The n-best list of one source text, best first (samples: in the order drawn).

    ``text`` / ``score`` / ``tokens`` / ``log_prob`` are those of the best hypothesis;
    ``truncated`` says the source was longer than the model's ``max_len`` and only its first
    ``max_len - 1`` tokens were read. ``alignment`` (with ``translate(..., alignment=True)``):
    the best hypothesis's (source word, target word) pairs, read from cross-attention
    (``aiayn.infer.alignment``), not a trained aligner.
    """

    hypotheses: tuple[Hypothesis, ...]
    truncated: bool = False
    alignment: tuple[tuple[int, int], ...] | None = None

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]

    @property
    def text(self) -> str:
        return self.best.text

    @property
    def score(self) -> float:
        return self.best.score

    @property
    def tokens(self) -> tuple[int, ...]:
        return self.best.tokens

    @property
    def log_prob(self) -> float:
        return self.best.log_prob

    @property
    def unmet(self) -> tuple[str, ...]:
        return self.best.unmet


@dataclass(frozen=True)
class Generation:
    """A continuation of one prompt: ``text`` (the new text only), ``tokens`` (the new ids),
    ``full_text`` (prompt and continuation decoded together), ``prompt_tokens`` (ids read)
    and ``finish_reason``: "stop" (eos or a stop string), "length" (``max_new_tokens``) or "cancelled"."""

    text: str
    tokens: tuple[int, ...]
    full_text: str
    prompt_tokens: int
    finish_reason: str


@dataclass(frozen=True)
class Classification:
    """The most probable ``label`` of a text and every label's probability, in the
    classifier's label order."""

    label: str
    probabilities: dict[str, float]

    @property
    def score(self) -> float:
        """The probability of ``label``."""
        return self.probabilities[self.label]
