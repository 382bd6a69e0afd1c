"""The attention weights behind one translation, for plots and for the server's page.

Vaswani et al. 2017 §3.2: every layer's heads weigh the keys of their query; here the
weights of the encoder's self-attention, the decoder's masked self-attention and the
decoder's attention over the encoder output (cross-attention), for the translation that
``aiayn translate`` gives the sentence.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.infer.translate import search, source_ids


@dataclass
class AttentionMap:
    """One sentence's translation and its attention weights, per layer (H, T_q, T_k)."""

    source: list[str]  # source pieces (S), ending with eos
    output: list[str]  # generated pieces (T): output[i] is predicted at decoder position i
    decoder_input: list[str]  # (T) bos + output[:-1]
    translation: str
    encoder: list[Tensor]  # per layer (H, S, S)
    decoder_self: list[Tensor]  # per layer (H, T, T)
    cross: list[Tensor]  # per layer (H, T, S)


def token_pieces(tokenizer, ids: list[int]) -> list[str]:
    """The vocabulary piece of each id (sentencepiece pieces, characters, or the pieces of an
    imported tokenizer)."""
    return [tokenizer.id_to_piece(i) for i in ids]


@torch.no_grad()
def translation_attention(
    model, tokenizer, sentence: str, beam: int = 1, lenpen: float = 0.6, max_len_offset: int = 50
) -> AttentionMap:
    """Translate ``sentence`` (greedy, or beam search with ``beam`` > 1) and return the
    attention weights of the teacher-forced pass over that translation."""
    if model.config.family != "encoder-decoder":
        raise ValueError(f"attention maps need an encoder-decoder model, not {model.config.family}")
    model.eval()
    (src_ids,), truncated = source_ids(model, tokenizer, [sentence])
    if truncated:
        warnings.warn(
            f"the sentence is longer than the model's max_len ({model.config.max_len} tokens); "
            f"only its first {model.config.max_len - 1} tokens are read",
            stacklevel=2,
        )
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)  # (1, S)
    hyp = search(model, src, beam, lenpen, max_len_offset)[0][0].tokens
    # (1, T): row i predicts hyp[i]
    tgt_in = torch.tensor([[model.config.bos_id] + hyp[:-1]], device=device)
    record: dict = {}
    model(src, tgt_in, attention=record)
    # the weights for plots and JSON: float32 on the CPU, whatever the model's device and dtype
    record = {k: [w.float().cpu() for w in ws] for k, ws in record.items()}
    return AttentionMap(
        source=token_pieces(tokenizer, src_ids),
        output=token_pieces(tokenizer, hyp),
        decoder_input=token_pieces(tokenizer, tgt_in[0].tolist()),
        translation=tokenizer.decode([hyp])[0],
        encoder=[w[0] for w in record["encoder"]],
        decoder_self=[w[0] for w in record["decoder_self"]],
        cross=[w[0] for w in record["cross"]],
    )
