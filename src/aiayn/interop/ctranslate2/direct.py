"""CTranslate2 on a CTranslate2 model as it is: an Argos Translate package's ``model/`` (or any
CTranslate2 model directory) read in place, its weights in the type they were saved in (int8
stays int8: CTranslate2's ``compute_type="default"``), fed the pieces of its tokenizer
(``aiayn.data.argos_tokenizer.ArgosTokenizer``) as Argos Translate feeds them. Nothing is
converted; the engine of aiayn's own models (``engine.CTranslate2Engine``, on a conversion it
caches) is another.

``DirectEngine.translate`` is Argos Translate's ``apply_packaged_translation`` over a batch of
sentences: CTranslate2's beam search of ``beam`` (Argos Translate: ``max(n, 4)``) with
CTranslate2's length penalty (a hypothesis is ranked by log P / |Y| ** ``length_penalty``;
Argos Translate: 0.2) and its stopping rule, ``replace_unknowns`` (an unknown target token
becomes the source token it attends to most), the package's target prefix, at most
``MAX_DECODING_LENGTH`` tokens (CTranslate2's default, which Argos Translate keeps) and a source
read up to ``MAX_INPUT_LENGTH`` tokens; each text read back as Argos Translate reads it
(``ArgosTokenizer.decode_pieces``). Scores are CTranslate2's (those Argos Translate sums).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiayn.data.argos_tokenizer import ArgosTokenizer
from aiayn.interop.ctranslate2.conversion import CannotRunHere, require_ctranslate2
from aiayn.interop.ctranslate2.engine import _device

MAX_DECODING_LENGTH = 256  # CTranslate2's max_decoding_length default, as Argos Translate calls it
MAX_INPUT_LENGTH = 1024  # CTranslate2's max_input_length default: a longer source is cut there
ARGOS_BEAM = 4  # argostranslate.settings.beam_size: the beam is max(n, 4)
ARGOS_LENGTH_PENALTY = 0.2  # argostranslate.translate.apply_packaged_translation's


@dataclass(frozen=True)
class Decoded:
    """One hypothesis: its text, its target pieces (the target prefix included) and its
    score, CTranslate2's (log P / |Y| ** length_penalty)."""

    text: str
    pieces: tuple[str, ...]
    score: float


class DirectEngine:
    """``ctranslate2.Translator`` over the CTranslate2 model in ``model_dir``, with the
    package's ``tokenizer``; ``device`` "cpu", "cuda" or "cuda:N"; ``threads`` per decoder
    (0: CTranslate2 chooses), ``decoders`` threads may translate at once (CTranslate2's
    ``inter_threads``); ``compute_type`` CTranslate2's ("default": the saved weights' type);
    ``max_positions``: the positions of the model's stored position tables (None: computed),
    which bound a source (``max_input_length``, cut there) and a translation
    (``max_decoding_length``)."""

    name = "ctranslate2"

    def __init__(
        self,
        model_dir: Path | str,
        tokenizer: ArgosTokenizer,
        *,
        device: str = "cpu",
        threads: int = 0,
        decoders: int = 1,
        compute_type: str = "default",
        max_positions: int | None = None,
    ) -> None:
        ctranslate2 = require_ctranslate2()
        import torch

        kind, index = _device(device)
        self.model_dir, self.tokenizer = Path(model_dir), tokenizer
        # a model with stored position tables reads and writes no sequence past them
        self.max_input_length = min(MAX_INPUT_LENGTH, max_positions or MAX_INPUT_LENGTH)
        self.max_decoding_length = min(MAX_DECODING_LENGTH, max_positions or MAX_DECODING_LENGTH)
        torch_threads = torch.get_num_threads()  # building a translator sets OpenMP's count
        try:
            self.translator = ctranslate2.Translator(
                str(self.model_dir),
                device=kind,
                device_index=index,
                compute_type=compute_type,
                inter_threads=decoders,
                intra_threads=threads,
            )
        except (RuntimeError, ValueError, OSError) as e:
            raise CannotRunHere(
                f"{self.model_dir}: CTranslate2 cannot load the model: {e}"
            ) from None
        finally:
            torch.set_num_threads(torch_threads)
        self.device = f"{kind}:{index}" if kind == "cuda" else kind
        self.compute_type: str = self.translator.compute_type  # e.g. int8_float32

    def translate(
        self,
        sentences: list[str],
        *,
        beam: int = ARGOS_BEAM,
        nbest: int = 1,
        length_penalty: float = ARGOS_LENGTH_PENALTY,
        prefixes: list[str] | None = None,
        max_len_offset: int | None = None,
        max_batch_tokens: int = 4096,
        replace_unknowns: bool = True,
    ) -> list[list[Decoded]]:
        """The ``nbest`` best hypotheses of each of ``sentences`` (see the module).
        ``prefixes`` (one per sentence, "" for none): text each translation begins with,
        after the package's target prefix; ``max_len_offset``: a translation has at most as
        many tokens as its source and this many more (None: ``max_decoding_length``,
        ``MAX_DECODING_LENGTH`` as Argos Translate decodes; never more); batches of at most ``max_batch_tokens`` source
        tokens."""
        if nbest > beam:
            raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({beam})")
        tokenizer = self.tokenizer
        sources = [tokenizer.pieces(s) for s in sentences]
        head = [tokenizer.target_prefix] if tokenizer.target_prefix else []
        heads = [
            head + (tokenizer.target_text_pieces(p) if prefixes and p else [])
            for p in (prefixes or [""] * len(sources))
        ]
        limits = [  # a prefix is held whole, and one token more may follow it
            max(
                self.max_decoding_length
                if max_len_offset is None
                else min(len(s) + max_len_offset, self.max_decoding_length),
                len(h) + 1,
            )
            for s, h in zip(sources, heads, strict=True)
        ]
        out: list[list[Decoded]] = [[] for _ in sources]
        groups: dict[int, list[int]] = {}  # CTranslate2 takes one limit a call
        for i, (source, limit) in enumerate(zip(sources, limits, strict=True)):
            if source:  # an empty text has an empty translation
                groups.setdefault(limit, []).append(i)
            else:
                out[i] = [Decoded("", tuple(heads[i]), 0.0)] * nbest
        for limit, members in groups.items():
            results = self.translator.translate_batch(
                [sources[i] for i in members],
                target_prefix=[heads[i] for i in members] if any(heads) else None,
                replace_unknowns=replace_unknowns,
                max_batch_size=max_batch_tokens,
                batch_type="tokens",
                beam_size=beam,
                num_hypotheses=nbest,
                length_penalty=length_penalty,
                max_decoding_length=limit,
                max_input_length=self.max_input_length,
                return_scores=True,
            )
            for i, result in zip(members, results, strict=True):
                out[i] = [
                    Decoded(tokenizer.decode_pieces(pieces), tuple(pieces), float(score))
                    for pieces, score in zip(result.hypotheses, result.scores, strict=True)
                ]
        return out
