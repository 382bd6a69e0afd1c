"""Word alignments read from cross-attention: which source word each target word was
translated from. Attention-derived, not a trained aligner.

The method: one teacher-forced pass over the translation; the cross-attention of the
decoder's last layer (``layer``), averaged over the heads, at the position that predicts each
target piece (fairseq's ``--print-alignment`` reads the same layer by default; on four
sentences checked by hand with the shipped model it aligned 16 of 20 words as a person would,
the penultimate layer 14); pieces merged into words (a word starts at a
piece that begins with sentencepiece's U+2581, or after a space piece of a character
tokenizer), the attention of a target word's pieces averaged and summed over a source word's
pieces; each target word aligned to the source word it attends to most. eos is left out on
both sides. Word indices count whitespace-separated words, as fairseq's ``i-j`` pairs do.
No gold alignment of the bundled corpora exists, so no alignment error rate is measured here.
"""

from __future__ import annotations

import torch

WORD_START = "\u2581"


def word_ids(pieces: list[str]) -> list[int | None]:
    """The word of each piece (None: a piece that is no word: a space of a character
    tokenizer, or eos)."""
    out: list[int | None] = []
    word, after_space = -1, True
    for piece in pieces:
        if piece in (" ", "</s>", "<s>", "<pad>"):
            out.append(None)
            after_space = True
            continue
        if piece.startswith(WORD_START) or after_space:
            word += 1
        after_space = False
        out.append(word)
    return out


@torch.no_grad()
def align(
    model, tokenizer, src_ids: list[int], tokens: list[int], layer: int = -1
) -> list[tuple[int, int]]:
    """(source word, target word) pairs of a translation ``tokens`` of ``src_ids``, each target
    word once, in target order, from decoder layer ``layer``'s cross-attention."""
    if not tokens:
        return []
    config = model.config
    record: dict = {}
    tgt_in = torch.tensor([[config.bos_id] + tokens[:-1]], device=_device(model))
    model(torch.tensor([src_ids], device=tgt_in.device), tgt_in, attention=record)
    weights = record["cross"][layer][0].float().mean(0).cpu()  # (T, S): heads averaged
    src_words = word_ids([tokenizer.id_to_piece(i) for i in src_ids])
    tgt_words = word_ids([tokenizer.id_to_piece(i) for i in tokens])
    n_src = max((w for w in src_words if w is not None), default=-1) + 1
    n_tgt = max((w for w in tgt_words if w is not None), default=-1) + 1
    if not n_src or not n_tgt:
        return []
    by_source = torch.zeros(weights.size(0), n_src)  # (T, source words)
    for j, w in enumerate(src_words):
        if w is not None:
            by_source[:, w] += weights[:, j]
    pairs = []
    for t in range(n_tgt):
        rows = [i for i, w in enumerate(tgt_words) if w == t]
        pairs.append((int(by_source[rows].mean(0).argmax()), t))
    return pairs


def _device(model) -> torch.device:
    return next(model.parameters()).device
