"""Result assembly: the search's n-best lists made into ``Translation`` values, with the
terms each hypothesis lacks and, where asked, the best hypothesis's word alignment."""

from __future__ import annotations

from aiayn.api.results import Hypothesis, Translation
from aiayn.api.terms import Held
from aiayn.infer import translate as decoding


def alignments(model, tokenizer, sources: list[str], out: list) -> list[tuple]:
    """The (source word, target word) pairs of each text's best translation in ``out``, read
    from cross-attention (``aiayn.infer.alignment``); an ensemble's from its first model."""
    from aiayn.infer.alignment import align
    from aiayn.infer.ensemble import Ensemble

    aligner = model.members[0] if isinstance(model, Ensemble) else model
    ids, _ = decoding.source_ids(model, tokenizer, sources)
    return [
        tuple(align(aligner, tokenizer, src, list(n_best[0][1].tokens)))
        if n_best and n_best[0][1].tokens else ()
        for src, n_best in zip(ids, out, strict=True)
    ]  # fmt: skip


def translations(
    out: list,
    truncated: list[int],
    wanted: list[list[Held]] | None,
    pairs: list | None = None,
) -> list[Translation]:
    """One ``Translation`` per n-best list of (text, search hypothesis) in ``out``:
    ``truncated`` lists the texts cut to the model's length, ``wanted`` what each had to
    hold (a hypothesis's unmet terms named from it), ``pairs`` each one's alignment."""
    cut = set(truncated)
    return [
        Translation(
            tuple(
                Hypothesis(
                    text,
                    tuple(h.tokens),
                    float(h.score),
                    float(h.log_prob),
                    tuple(wanted[i][c].text for c in h.unmet) if wanted else (),
                )  # fmt: skip
                for text, h in n_best
            ),
            truncated=i in cut,
            alignment=None if pairs is None else pairs[i],
        )
        for i, n_best in enumerate(out)
    ]
