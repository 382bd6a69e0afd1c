"""The searches of the CTranslate2 engine, each one or a few calls of CTranslate2's
``translate_batch`` answered in aiayn's terms: greedy, beam (its hypotheses rescored with
GNMT's length penalty), sampling (CTranslate2's sampler given the torch engine's meaning), and
the model's log-probability of a hypothesis (``score_batch``) where CTranslate2's scores are
not aiayn's. How each option maps: ``aiayn.interop.ctranslate2.engine``.
"""

from __future__ import annotations

import math

from aiayn.data.tokenizer import EOS
from aiayn.infer.beam import Hypothesis, length_penalty

BEAM_PATIENCE = 2.0  # with lenpen > 0 and no early stop (Searches._beam_call)
FLOAT32_TINY = 2.0**-126  # float32's smallest normal number: the least top-p given to CTranslate2


class Searches:
    """The searches, as methods of ``CTranslate2Engine`` (its base class). They read the
    translator of this thread's search (``_decoding``), the engine's token tables
    (``_pieces``, ``_target``, ``_outputs``), the target prefixes of this thread's search
    (``_heads``), and, for a seeded sample, ``_translator`` and ``_seed_lock``."""

    def _common(self, limit: int, members: list[int] | None = None) -> dict:
        common = dict(
            max_decoding_length=limit,
            min_decoding_length=0,
            max_input_length=0,
            return_end_token=True,
            return_scores=True,
        )
        if self._heads:
            heads = self._heads if members is None else [self._heads[i] for i in members]
            common["target_prefix"] = heads
        return common

    def _rescored(self, sources, out: list[list[Hypothesis]], lenpen: float | None):
        """Hypotheses scored by the model over the whole target (prefix included): a
        greedy or sampled one by its log-probability, a beam's by GNMT's ``lenpen``."""
        flat = [(i, h) for i, hyps in enumerate(out) for h in hyps]
        scores = self._log_probs([sources[i] for i, _ in flat], [h.tokens for _, h in flat])
        again: list[list[Hypothesis]] = [[] for _ in out]
        for (i, h), log_prob in zip(flat, scores, strict=True):
            score = log_prob if lenpen is None else log_prob / length_penalty(len(h.tokens), lenpen)
            again[i].append(Hypothesis(h.tokens, score, log_prob))
        if lenpen is not None:
            again = [sorted(hyps, key=lambda h: -h.score) for hyps in again]
        return again

    def _greedy(self, sources, limits, scores: bool = True) -> list[list[Hypothesis]]:
        """One call up to the longest limit; greedy tokens do not depend on the limit, so a
        row past its own limit is cut there (and its shorter prefix scored anew)."""
        if not sources:
            return []
        common = self._common(max(limits), None)
        common["return_scores"] = scores
        results = self._decoding.translate_batch(sources, beam_size=1, length_penalty=0.0, **common)
        out, cut = [], []
        for i, (result, limit) in enumerate(zip(results, limits, strict=True)):
            tokens = self._target(result.hypotheses[0])
            if len(tokens) > limit:
                tokens = tokens[:limit]
                cut.append(i)
            score = float(result.scores[0]) if scores else math.nan
            out.append([Hypothesis(tokens, score, score)])
        if not scores:
            return out
        if self._heads:  # CTranslate2's scores leave the prefix out
            return self._rescored(sources, out, None)
        if cut:
            scores = self._log_probs([sources[i] for i in cut], [out[i][0].tokens for i in cut])
            for i, score in zip(cut, scores, strict=True):
                out[i] = [Hypothesis(out[i][0].tokens, score, score)]
        return out

    def _groups(self, limits: list[int]) -> dict[int, list[int]]:
        """Sentence indices by length limit (CTranslate2 takes one limit per call)."""
        groups: dict[int, list[int]] = {}
        for i, limit in enumerate(limits):
            groups.setdefault(limit, []).append(i)
        return groups

    def _beam(self, sources, limits, beam, lenpen, nbest, early_stop) -> list[list[Hypothesis]]:
        """One call for the batch, up to its longest limit; a sentence whose n-best list then
        holds a hypothesis past its own limit is searched again alone, within it."""
        if not sources:
            return []
        everyone = list(range(len(sources)))
        out = self._beam_call(sources, everyone, max(limits), beam, lenpen, nbest, early_stop)
        over = [i for i, hyps in enumerate(out) if any(len(h.tokens) > limits[i] for h in hyps)]
        for limit, members in self._groups([limits[i] for i in over]).items():
            again = [over[j] for j in members]
            redone = self._beam_call(
                [sources[i] for i in again], again, limit, beam, lenpen, nbest, early_stop
            )
            for i, hyps in zip(again, redone, strict=True):
                out[i] = hyps
        if self._heads:  # CTranslate2's scores leave the prefix out
            out = [hyps[:nbest] for hyps in self._rescored(sources, out, lenpen)]
        return out

    def _beam_call(self, sources, members, limit, beam, lenpen, nbest, early_stop):
        """CTranslate2's beam search; its hypotheses rescored with GNMT's length penalty.

        CTranslate2 stops a sentence once ``patience * beam`` hypotheses have finished. With
        lenpen > 0 aiayn's exact search goes on while a live hypothesis could still win:
        patience 2 gives the same best hypothesis on 1000 of the shipped model's 1000 test
        sentences (patience 1: 985; bench/decode_speed.py records both), at CTranslate2's
        speed. ``early_stop``: patience 1, CTranslate2's own rule."""
        exhaustive = lenpen > 0 and not early_stop
        results = self._decoding.translate_batch(
            sources,
            beam_size=beam,
            length_penalty=lenpen,
            patience=BEAM_PATIENCE if exhaustive else 1.0,
            num_hypotheses=nbest if lenpen == 0 and not self._heads else beam,
            **self._common(limit, members),
        )
        out = []
        for result in results:
            hyps = []
            for pieces, score in zip(result.hypotheses, result.scores, strict=True):
                tokens = self._target(pieces)
                log_prob = float(score) * len(tokens) ** lenpen  # undo |Y| ** lenpen
                gnmt = log_prob / length_penalty(len(tokens), lenpen)
                hyps.append(Hypothesis(tokens, gnmt, log_prob))
            out.append(sorted(hyps, key=lambda h: -h.score)[:nbest])
        return out

    def _sampling(self, sampling, nbest: int) -> tuple[dict, int]:
        """CTranslate2's options for ``sampling`` with the torch engine's meaning, and how many
        copies of each drawn hypothesis make the ``nbest`` samples.

        Greedy (temperature 0, or top_k 1) is CTranslate2's best-token search, which gives one
        hypothesis (it refuses more): the ``nbest`` samples are copies of it, as the torch
        engine's are. A top_k of CTranslate2's whole vocabulary or more (which CTranslate2
        refuses past its vocabulary) is no top-k filter, as in the torch engine. CTranslate2
        reads top_p as float32 and refuses 0: a top_p below float32's smallest normal number
        is that number. Either keeps only the most likely token, as does any top_p up to
        1 / vocabulary size in both engines.
        """
        greedy = sampling.temperature == 0 or sampling.top_k == 1
        top_k = sampling.top_k or 0
        options = dict(
            beam_size=1,
            num_hypotheses=1 if greedy else nbest,
            sampling_topk=1 if greedy else (0 if top_k >= self._outputs else top_k),
            sampling_topp=max(sampling.top_p, FLOAT32_TINY),
            sampling_temperature=1.0 if greedy else sampling.temperature,
        )
        return options, nbest if greedy else 1

    def _sample(self, sources, limits, nbest, sampling) -> list[list[Hypothesis]]:
        """CTranslate2 seeds a translator's random generators when it starts its threads,
        so a seeded call runs on a translator of its own, of one decoder (a call of a later
        length group would otherwise meet a decoder another group's draws had moved on, or
        a fresh one), an unseeded one on the engine's."""
        import ctranslate2

        options, copies = self._sampling(sampling, nbest)
        out: list = [None] * len(sources)
        with self._seed_lock:
            translator = self._decoding  # seed None: a fresh draw each call
            if sampling.seed is not None:
                ctranslate2.set_random_seed(sampling.seed)
                translator = self._translator(inter_threads=1)
            for limit, members in self._groups(limits).items():
                results = translator.translate_batch(
                    [sources[i] for i in members], **options, **self._common(limit, members)
                )
                for i, result in zip(members, results, strict=True):
                    out[i] = [self._target(p) for p in result.hypotheses] * copies
        flat = [(i, tokens) for i, samples in enumerate(out) for tokens in samples]
        scores = self._log_probs([sources[i] for i, _ in flat], [t for _, t in flat])
        hyps: list[list[Hypothesis]] = [[] for _ in sources]
        for (i, tokens), score in zip(flat, scores, strict=True):
            hyps[i].append(Hypothesis(tokens, score, score))
        return hyps

    def _log_probs(self, sources, targets: list[list[int]]) -> list[float]:
        """log P(target | source) of each pair under the model (teacher forcing); a target
        without eos (cut at its limit) is scored without it."""
        if not targets:
            return []
        body = [[self._pieces[t] for t in tokens if t != EOS] for tokens in targets]
        results = self._decoding.score_batch(sources, body, max_input_length=0)
        scores = []
        for tokens, result in zip(targets, results, strict=True):
            log_probs = list(result.log_probs)  # one per target token, then eos
            ended = bool(tokens) and tokens[-1] == EOS
            scores.append(float(sum(log_probs if ended else log_probs[:-1])))
        return scores
