"""Metrics from the standard tools: sacreBLEU and chrF (sacrebleu), perplexity."""

from __future__ import annotations

import math
import time

import sacrebleu


def bleu_chrf(hypotheses: list[str], references: list[str]) -> dict:
    """Corpus sacreBLEU and chrF on detokenized text, with the tools' signatures."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": round(b.score, 2),
        "chrf": round(c.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def perplexity(mean_nll: float) -> float:
    return math.exp(min(mean_nll, 50.0))


def evaluate_translation(
    model,
    tokenizer,
    data_config,
    split: str = "test",
    limit: int = 0,
    decoder=None,
    translate=None,
    **search,
) -> tuple[dict, list[tuple[str, str]], list[str]]:
    """Translate ``split`` of the corpus; score it, and the validation perplexity.

    ``search`` takes translate()'s options: beam, lenpen, max_len_offset, early_stop;
    ``decoder`` (default: ``model``) translates, e.g. a ``CTranslate2Engine``; ``translate``
    (texts -> their translations), where given, translates instead (a translator's own, as an
    Argos Translate package's, ``search`` then unused); the perplexity is always ``model``'s.
    Returns (scores, source/reference pairs, hypotheses).
    """
    from aiayn.data.parallel import encode_split, load_texts
    from aiayn.data.tokenizer import PAD
    from aiayn.infer.translate import translate_best
    from aiayn.train.objectives import evaluate_loss

    pairs = load_texts(data_config, split)
    if limit:
        pairs = pairs[:limit]
    stats: dict = {}
    sources = [s for s, _ in pairs]
    if translate is not None:
        start = time.perf_counter()
        hyps = translate(sources)
        stats["sentences_per_s"] = len(sources) / max(time.perf_counter() - start, 1e-9)
    else:
        hyps = translate_best(decoder or model, tokenizer, sources, stats=stats, **search)
    scores = {"split": split, "sentences": len(pairs), **bleu_chrf(hyps, [t for _, t in pairs])}
    frame = model.config.source_frame
    valid = encode_split(data_config, tokenizer, "valid", filter_long=False, frame=frame)
    device = next(model.parameters()).device  # the batches go where the model is
    loss, _ = evaluate_loss(model, valid.batches(4096, shuffle=False), PAD, device=device)
    scores["valid_ppl"] = round(perplexity(loss), 2)
    scores["sentences_per_s"] = round(stats["sentences_per_s"], 1)
    return scores, pairs, hyps
