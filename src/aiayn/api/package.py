"""``PackageTranslator``: an Argos Translate package (or a CTranslate2 model directory) as a
``Translator``, decoded by CTranslate2 as Argos Translate decodes it, and by aiayn's import of it
for what only aiayn's model does.

``aiayn.load("translate-de_en-1_0.argosmodel")`` (an archive, an installed package folder, or a
CTranslate2 model directory: ``aiayn.interop.foreign``) gives one. Two engines:

* CTranslate2 on the package's own ``model/`` (its int8 weights, nothing converted:
  ``aiayn.interop.ctranslate2.direct``) translates greedy and beam search, n-best lists and
  prefixes. By default with Argos Translate's settings: beam ``max(nbest, 4)``, CTranslate2's
  length penalty 0.2 (a hypothesis ranked by log P / |Y| ** 0.2), unknown tokens replaced by
  the source token attended to most, the package's target prefix, at most 256 tokens a
  translation: a text decoded so is the text Argos Translate gives for it as one sentence.
  Scores are CTranslate2's (Argos Translate's); ``log_prob`` is not computed (NaN): ``score``
  gives log P.
* aiayn's model, the package imported once (``aiayn.interop.ctranslate2.importer``) into a
  cache (``aiayn.interop.argos_cache``: checked before each use) and loaded on first need,
  translates what CTranslate2 cannot: a text with terms to hold (``glossary``,
  ``constraints``, ``keep``: constrained beam search; the other texts of the call stay with
  CTranslate2), ``sampling``, ``alignment`` (and so HTML and documents, whose markup is placed
  by it); ``score`` and ``attention`` run it too. There ``lenpen`` is aiayn's (GNMT's alpha,
  Argos's 0.2 by default) and ``max_len_offset`` aiayn's 50 by default.

``split_sentences``: the sentence splitter the package carries (``aiayn.interop.argos_splitter``;
None: aiayn's own), which the server cuts its texts with, as Argos Translate does.
"""

from __future__ import annotations

import math
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.api.options import check_translate, decoded_sampling
from aiayn.api.preparation import prefix_list, text_list
from aiayn.api.results import Hypothesis, Translation
from aiayn.api.terms import GlossaryLike, glossary_terms, text_constraints
from aiayn.api.translator import Translator
from aiayn.infer.sampling import Sampling
from aiayn.interop.ctranslate2.direct import (
    ARGOS_BEAM,
    ARGOS_LENGTH_PENALTY,
    MAX_INPUT_LENGTH,
    DirectEngine,
)
from aiayn.interop.foreign import ForeignModel, open_foreign

IMPORTED_MAX_LEN_OFFSET = 50  # Translator.translate's default, for the imported model


@dataclass(frozen=True)
class PackageConfig:
    """What a package says of its model before aiayn's import of it loads (that import's
    ``ModelConfig`` is ``PackageTranslator.imported.config``): its family, its target and
    source vocabulary sizes, and ``max_len``: the longest source CTranslate2 reads whole (with
    eos: ``MAX_INPUT_LENGTH``, or fewer where the model stores fewer positions), which bounds
    the sentences a server cuts text into (a translation has at most ``MAX_DECODING_LENGTH``
    tokens, or as many as the positions)."""

    family: str
    vocab_size: int
    src_vocab_size: int
    max_len: int = MAX_INPUT_LENGTH


class PackageTranslator(Translator):
    """An Argos Translate package, or a CTranslate2 model directory, as a ``Translator``
    (see the module)::

        tr = aiayn.load("translate-de_en-1_0.argosmodel")
        tr.translate(["Guten Morgen."])[0].text  # as Argos Translate translates it
        tr.translate(["Die Schraube."], glossary={"Schraube": "bolt"})  # aiayn's import

    ``foreign``: the model read (``aiayn.interop.foreign.open_foreign``); ``device``: where
    both engines run; ``dtype``: the imported model's weights; ``cache_dir``: where the
    import is kept; ``decoders``: threads that may translate at once with CTranslate2.
    """

    def __init__(
        self,
        foreign: ForeignModel,
        *,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype = "float32",
        cache_dir: Path | str | None = None,
        decoders: int = 1,
    ) -> None:
        from aiayn.api.device import placement

        where = placement(device, "float32", engine="ctranslate2")  # checked before any load
        self.foreign = foreign
        self.path, self.run = foreign.path, foreign.run
        self.tokenizer = foreign.tokenizer()
        self.fast = DirectEngine(
            foreign.model_dir,
            self.tokenizer,
            device=str(where.device),
            threads=torch.get_num_threads(),
            decoders=decoders,
            max_positions=foreign.max_positions,
        )
        self.decoder, self.auto = self.fast, False  # Translator's: what decodes, no "auto"
        self.split_sentences = foreign.splitter()
        self.cache_dir = cache_dir
        self._placement = (where.device, dtype)
        self._imported: Translator | None = None
        self._import_lock = threading.Lock()
        self._config = PackageConfig(
            "encoder-decoder",
            self.tokenizer.vocab_size,
            self.tokenizer.source_vocab_size,
            self.fast.max_input_length,
        )

    @classmethod
    def open(
        cls,
        path: Path | str,
        *,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype = "float32",
        cache_dir: Path | str | None = None,
        decoders: int = 1,
        languages: tuple[str, str] | None = None,
    ) -> PackageTranslator:
        """The package or CTranslate2 model at ``path`` (``languages``: a CTranslate2 model's
        pair, which nothing in it says)."""
        foreign = open_foreign(path, cache_dir, languages)
        return cls(foreign, device=device, dtype=dtype, cache_dir=cache_dir, decoders=decoders)

    # --- aiayn's import, loaded on first need -------------------------------------------------

    @property
    def imported(self) -> Translator:
        """aiayn's model of the package (imported into the cache once, loaded on first use;
        the torch engine)."""
        with self._import_lock:
            if self._imported is None:
                directory = self.foreign.imported(self.cache_dir)
                device, dtype = self._placement
                self._imported = Translator.from_dir(
                    directory, device=device, dtype=dtype, engine="torch"
                )
            return self._imported

    @property
    def is_imported(self) -> bool:
        """Whether aiayn's import is loaded (a request needed it)."""
        return self._imported is not None

    @property
    def model(self):
        """aiayn's model (``imported``: loaded now if it is not)."""
        return self.imported.model

    # --- what the package says ----------------------------------------------------------------

    @property
    def config(self) -> PackageConfig:
        return self._config

    @property
    def device(self) -> torch.device:
        return self._placement[0]

    @property
    def dtype(self) -> str:
        """What CTranslate2 computes in: float32 (int8 weights with float32 activations)."""
        return "float32"

    @property
    def parameters(self) -> int:
        return self.foreign.parameters

    @property
    def quantization(self) -> str | None:
        """ "int8" where CTranslate2 decodes the package's int8 weights as they are."""
        return "int8" if "int8" in self.fast.compute_type else None

    @property
    def languages(self) -> tuple[str, str] | None:
        return self.foreign.languages

    @property
    def language_names(self) -> dict[str, str]:
        """The languages' names, as the package's metadata gives them."""
        return dict(self.foreign.language_names)

    @property
    def max_text_tokens(self) -> int:
        return self.config.max_len - 1

    @property
    def engine(self) -> str:
        return "ctranslate2"

    @property
    def engines(self) -> dict[str, str]:
        return {"greedy": "ctranslate2", "beam": "ctranslate2", "other": "torch"}

    def fast_decoder(self):
        return None

    def __repr__(self) -> str:
        return f"<PackageTranslator {self.foreign.name} from {self.path}>"

    # --- translating ----------------------------------------------------------------------------

    def translate(
        self,
        texts: Sequence[str],
        *,
        beam: int | None = None,
        lenpen: float | None = None,
        nbest: int = 1,
        sampling: Sampling | None = None,
        max_len_offset: int | None = None,
        early_stop: bool = False,
        max_tokens: int = 4096,
        first_index: int = 0,
        scores: bool = True,
        prefix: Sequence[str] | None = None,
        alignment: bool = False,
        glossary: GlossaryLike | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
        keep: Sequence[str] | None = None,
    ) -> list[Translation]:
        """``Translator.translate`` over the package (see the module for which engine
        answers what). Unset, ``beam`` is Argos Translate's ``max(nbest, 4)`` (1 with
        ``sampling``), ``lenpen`` its 0.2, ``max_len_offset`` none for CTranslate2 (a
        translation of up to 256 tokens, as Argos Translate decodes) and 50 for the imported
        model. On CTranslate2, ``early_stop`` and ``scores`` change nothing (its own stopping
        rule; its scores come with every hypothesis) and ``first_index`` does not apply."""
        if beam is None:
            beam = 1 if sampling is not None else max(nbest, ARGOS_BEAM)
        lenpen = ARGOS_LENGTH_PENALTY if lenpen is None else lenpen
        offset = IMPORTED_MAX_LEN_OFFSET if max_len_offset is None else max_len_offset
        check_translate(beam, lenpen, offset, nbest, early_stop, sampling)
        sampling = decoded_sampling(sampling)
        texts = text_list(texts)
        prefixes = prefix_list(prefix, texts)
        wanted = text_constraints(
            texts, glossary_terms(glossary, self.languages), constraints, keep
        )
        if sampling is not None or alignment:
            held = list(range(len(texts)))
        else:
            held = [i for i, w in enumerate(wanted or []) if w]
        out: list[Translation | None] = [None] * len(texts)
        if held:
            for i, t in zip(held, self.imported.translate(
                [texts[i] for i in held], beam=beam, lenpen=lenpen, nbest=nbest,
                sampling=sampling, max_len_offset=offset, early_stop=early_stop,
                max_tokens=max_tokens, first_index=first_index, scores=scores,
                prefix=None if prefixes is None else [prefixes[i] for i in held],
                alignment=alignment, glossary=glossary,
                constraints=None if constraints is None else [constraints[i] for i in held],
                keep=keep,
            ), strict=True):  # fmt: skip
                out[i] = t
        plain = [i for i in range(len(texts)) if out[i] is None]
        if plain:
            for i, t in zip(plain, self._direct(
                [texts[i] for i in plain], beam, lenpen, nbest, max_len_offset, max_tokens,
                None if prefixes is None else [prefixes[i] for i in plain],
            ), strict=True):  # fmt: skip
                out[i] = t
        return out  # type: ignore[return-value]

    def _direct(
        self, texts, beam, lenpen, nbest, max_len_offset, max_tokens, prefixes
    ) -> list[Translation]:
        """``texts`` translated by CTranslate2 on the package's model (composed, NFC, as
        aiayn reads every text)."""
        sources = [unicodedata.normalize("NFC", t) for t in texts]
        decoded = self.fast.translate(
            sources, beam=beam, nbest=nbest, length_penalty=lenpen, prefixes=prefixes,
            max_len_offset=max_len_offset, max_batch_tokens=max_tokens,
        )  # fmt: skip
        results = []
        for source, hypotheses in zip(sources, decoded, strict=True):
            truncated = len(self.tokenizer.pieces(source)) >= self.fast.max_input_length
            results.append(
                Translation(
                    tuple(
                        Hypothesis(
                            h.text,
                            tuple(self.tokenizer.encode_pieces(list(h.pieces), target=True)),
                            h.score,
                            math.nan,
                        )
                        for h in hypotheses
                    ),
                    truncated=truncated,
                )
            )
        return results

    def score(
        self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64
    ) -> list[float]:
        """log P(target | source) under aiayn's import of the package (``Translator.score``)."""
        return self.imported.score(sources, targets, batch_size=batch_size)

    def attention(self, text: str, *, beam: int = 1, lenpen: float = 0.6, max_len_offset: int = 50):
        """``Translator.attention`` of aiayn's import of the package."""
        return self.imported.attention(
            text, beam=beam, lenpen=lenpen, max_len_offset=max_len_offset
        )

    def translate_html(
        self,
        documents: Sequence[str],
        *,
        beam: int | None = None,
        lenpen: float | None = None,
        max_len_offset: int | None = None,
        **options,
    ) -> list[str]:
        """``Translator.translate_html`` with the package's defaults (``translate``'s)."""
        return super().translate_html(
            documents, beam=beam, lenpen=lenpen, max_len_offset=max_len_offset, **options
        )

    def translate_file(
        self,
        path: Path | str,
        out: Path | str,
        *,
        beam: int | None = None,
        lenpen: float | None = None,
        max_len_offset: int | None = None,
        **options,
    ) -> Path:
        """``Translator.translate_file`` with the package's defaults (``translate``'s)."""
        return super().translate_file(
            path, out, beam=beam, lenpen=lenpen, max_len_offset=max_len_offset, **options
        )
