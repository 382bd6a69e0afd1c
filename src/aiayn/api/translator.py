"""``Translator``: an encoder-decoder model (Vaswani et al. 2017) as one object."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from aiayn.api import assembly, search
from aiayn.api.base import LoadedModel
from aiayn.api.device import placement
from aiayn.api.engine import resolve_engine
from aiayn.api.options import check_search, check_translate, decoded_sampling
from aiayn.api.preparation import document_sentences, page_sentences, prepare, text_list
from aiayn.api.results import Translation
from aiayn.api.terms import GlossaryLike
from aiayn.data.batching import pad
from aiayn.documents import Limits
from aiayn.errors import OptionError, UserError
from aiayn.infer import translate as decoding
from aiayn.infer.attention import AttentionMap, translation_attention
from aiayn.infer.sampling import Sampling
from aiayn.modeldir import ModelDir

__all__ = ["Translator", "text_list"]


class Translator(LoadedModel):
    """Translate, score and explain with an encoder-decoder model::

    tr = aiayn.load("models/ding-de-en")
    for t in tr.translate(["Guten Morgen.", "Wie geht es?"], beam=4):
        print(t.text, t.score)
    tr.score(["Guten Morgen."], ["Good morning."])  # log P(target | source)

    ``engine`` names what ``translate`` decodes with: "torch" (the model) or "ctranslate2"
    (``decoder`` is then an ``aiayn.interop.ctranslate2.CTranslate2Engine``); ``score`` and
    ``attention`` always run the torch model; "auto" decodes with CTranslate2 what it can
    (``aiayn.api.engine``), and with the model the rest, requests with constraints (glossary
    terms, kept spans) among them.
    """

    family = "encoder-decoder"

    def __init__(self, model, tokenizer, path=None, run=None, *, decoder=None):
        super().__init__(model, tokenizer, path, run)
        self.decoder = self.model if decoder is None else decoder
        self.auto = False  # engine "auto": what CTranslate2 answers as the model goes to it
        self._make_fast: Callable[[], object] | None = None  # builds it, on first use
        self._fast_lock = threading.Lock()

    @classmethod
    def from_dir(
        cls,
        path: ModelDir | Path | str,
        *,
        quantize: str | None = None,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype = "float32",
        engine: str = "torch",
        cache_dir: Path | str | None = None,
        decoders: int = 1,
    ):
        """Load a model directory; ``engine`` "ctranslate2" also converts it for CTranslate2
        (once; cached in ``cache_dir``, by default as ``aiayn.load`` says), which then
        translates on ``device``'s kind with as many threads as torch has
        (``torch.get_num_threads``), in float32 (int8 with ``quantize``), with ``decoders``
        copies of its decoder for as many threads calling ``translate`` at once; "auto" does
        so where CTranslate2 is installed and runs the model as asked, and then decodes
        greedy and beam search for one translation without scores with it
        (``aiayn.api.engine``)."""
        directory = ModelDir.open(path)
        int8 = quantize or directory.quantization
        used = resolve_engine(engine, directory.config, device=device, dtype=dtype, quantize=int8)
        if used == "torch":
            return super().from_dir(directory, quantize=quantize, device=device, dtype=dtype)
        where = placement(device, dtype, quantize=int8, engine=used)
        make = search.ctranslate2_maker(
            directory, quantize=quantize, device=where.device, decoders=decoders,
            cache_dir=cache_dir,
        )  # fmt: skip
        decoder = None if engine == "auto" else make()  # "auto": converted on first use
        translator = super().from_dir(directory, quantize=quantize, device=where.device)
        if decoder is not None:
            translator.decoder = decoder
        else:
            translator.auto, translator._make_fast = True, make
        return translator

    def fast_decoder(self):
        """Under engine "auto": the CTranslate2 engine, converted (once, cached) on the first
        call; None where there is none (another engine, or a model CTranslate2 cannot take,
        which the torch model then decodes)."""
        with self._fast_lock:
            if self._make_fast is not None:
                make, self._make_fast = self._make_fast, None
                fast = search.built_or_none(make)
                if fast is None:
                    self.auto = False
                else:
                    self.decoder = fast
        return self.decoder if self.auto else None

    @classmethod
    def ensemble(
        cls,
        paths: Sequence[ModelDir | Path | str],
        *,
        quantize: str | None = None,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype = "float32",
    ) -> Translator:
        """The translators in ``paths`` decoded as one (``aiayn.infer.ensemble.Ensemble``):
        at every step their next-token probabilities are averaged, for greedy search, beam
        search, sampling and prefixes alike. They must share their tokenizer (the same file)
        and so their vocabulary; ``score`` gives the ensemble's log-probabilities."""
        from aiayn.infer.ensemble import Ensemble

        dirs = [ModelDir.open(p) for p in paths]
        for d in dirs:  # every member's device and dtype checked before any loads
            placement(device, dtype, quantize=quantize or d.quantization)
        members = [cls.from_dir(d, quantize=quantize, device=device, dtype=dtype) for d in dirs]
        search.check_one_tokenizer(dirs)
        model = Ensemble([m.model for m in members])
        return cls(model, members[0].tokenizer, dirs[0].path, members[0].run)

    @property
    def engine(self) -> str:
        """What ``translate`` decodes with: "torch" or "ctranslate2" (under engine "auto":
        what greedy and beam search for one translation without scores decode with;
        everything else runs the torch model)."""
        return "ctranslate2" if self.auto else getattr(self.decoder, "name", "torch")

    @property
    def engines(self) -> dict[str, str]:
        """What decodes which requests: {"greedy": engine, "beam": engine, "other": engine}
        ("beam": beam search for one translation; "other": the rest)."""
        other = "torch" if self.auto else self.engine
        return {"greedy": self.engine, "beam": self.engine, "other": other}

    @property
    def languages(self) -> tuple[str, str] | None:
        """(source, target) language codes the model was trained on, when run.json says."""
        data = self.run.get("data", {})
        if data.get("task", "translation") == "translation" and "src_lang" in data:
            return (data["src_lang"], data["tgt_lang"])
        return None

    def translate(
        self,
        texts: Sequence[str],
        *,
        beam: int = 1,
        lenpen: float = 0.6,
        nbest: int = 1,
        sampling: Sampling | None = None,
        max_len_offset: int = 50,
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
        """The n-best translations of ``texts``, in input order.

        Greedy search (``beam`` 1), beam search with the length penalty ``lenpen`` (§6.1),
        or with ``sampling`` ``nbest`` samples per text (Phuong & Hutter 2022, Algorithm
        15). An output stops at eos or at its source length + ``max_len_offset``.
        ``early_stop``: beam search stops a sentence once its best live hypothesis would
        lose (faster; the default stops when none can still win). Texts are sorted by
        length and batched up to ``max_tokens`` source tokens; with sampling, ``texts[k]``
        draws as sentence ``first_index + k`` (samples then do not depend on the batch).
        ``scores`` False leaves greedy outputs unscored (score and log_prob NaN), for a caller
        that keeps only the text: each step then skips a sum over the vocabulary (under
        engine "auto" greedy and beam search then run on CTranslate2, whose beam scores
        differ from the torch model's in the fourth digit).
        ``prefix`` (one text per text, "" for none): target text each translation must begin
        with (a translation a person started, a fixed opening); it is read in one teacher-
        forced pass and the search goes on from its end, for greedy, beam and sampling alike;
        hypotheses hold it and are scored over the whole target. ``alignment``: each
        translation's word alignment, from the torch model's cross-attention
        (``aiayn.infer.alignment``: the method, and what it is not).

        With the ctranslate2 engine: what its searches give (``aiayn.api.search``).

        Terms each translation must hold, placed by lexically constrained beam search
        (``aiayn.infer.constrained``; docs/decoding.md): ``glossary`` (a JSON or TSV file, a
        ``Glossary``, ``{"de_en": {"Schraube": "bolt"}}`` or ``{"Schraube": "bolt"}``): the
        target of each of its source terms found in a text (ignoring case, on word
        boundaries, the longest first); ``constraints`` (one list of target strings per
        text); ``keep`` (regular expressions, e.g. ``aiayn.PLACEHOLDERS``): the spans of a
        text they match, kept verbatim. A text with any decodes with constrained beam search
        (``beam`` at least 4, greedy and sampling requests too); the others as without. A
        term a ``prefix`` holds is met (not placed again after it).
        ``Hypothesis.unmet`` names what a translation lacks (only if its length limit came
        first). The ctranslate2 engine has no constraints: such a request is an error, or,
        loaded with ``engine="auto"``, decodes with the torch model.

        Texts are read composed (NFC), as the corpora are written: an "ä" written as "a" and
        U+0308 (decomposed, NFD, as macOS writes file names) is an "ä" to the model and to
        the glossary.
        """
        check_translate(beam, lenpen, max_len_offset, nbest, early_stop, sampling)
        sampling = decoded_sampling(sampling)
        ready = prepare(
            texts, self.tokenizer, self.languages, prefix=prefix, glossary=glossary,
            constraints=constraints, keep=keep,
        )  # fmt: skip
        decoder = search.decoder_for(
            ready.held, model=self.model, decoder=self.decoder,
            fast=self.fast_decoder if self.auto else None, beam=beam, nbest=nbest,
            sampling=sampling, prefixes=ready.prefixes, alignment=alignment, scores=scores,
            early_stop=early_stop,
        )  # fmt: skip
        out, truncated = decoding.translate_texts(
            decoder, self.tokenizer, ready.sources, beam, lenpen, max_len_offset, nbest,
            early_stop, max_tokens, sampling, first_index, scores, ready.prefixes, ready.held,
            ready.banned,
        )  # fmt: skip
        pairs = (
            assembly.alignments(self.model, self.tokenizer, ready.sources, out)
            if alignment
            else None
        )
        return assembly.translations(out, truncated, ready.wanted, pairs)

    def translate_html(
        self,
        documents: Sequence[str],
        *,
        beam: int = 1,
        lenpen: float = 0.6,
        sampling: Sampling | None = None,
        max_len_offset: int = 50,
        early_stop: bool = False,
        max_tokens: int = 4096,
        names: Sequence[str] | None = None,
        glossary: GlossaryLike | None = None,
        keep: Sequence[str] | None = None,
    ) -> list[str]:
        """``documents`` (HTML pages or fragments) with their text translated and their markup
        kept: every element and attribute stays, an inline element (``<b>``, ``<a href>``)
        around the words translated from the words it held (``aiayn.data.markup``: how, and
        what is refused). Each segment (the text between two blocks) is translated sentence by
        sentence, a sentence too long for the model in pieces. Search options, ``glossary``
        and ``keep`` as ``translate``'s; ``names``: what errors call each document (a file
        name). What is marked ``translate="no"`` or ``class="notranslate"`` is never read by
        the model: it is kept whole, verbatim, once, in its place among the words."""
        limit = self.max_text_tokens
        sentences = page_sentences(
            documents, names, lambda t: self.token_counts([t])[0] <= limit, keep
        )
        out = self.translate(
            sentences.texts, beam=beam, lenpen=lenpen, sampling=sampling,
            max_len_offset=max_len_offset, early_stop=early_stop, max_tokens=max_tokens,
            scores=False, alignment=True, glossary=glossary, keep=keep,
        )  # fmt: skip
        return sentences.render([(t.text, t.alignment or ()) for t in out])

    def translate_file(
        self,
        path: Path | str,
        out: Path | str,
        *,
        beam: int = 1,
        lenpen: float = 0.6,
        sampling: Sampling | None = None,
        max_len_offset: int = 50,
        early_stop: bool = False,
        max_tokens: int = 4096,
        limits: Limits | None = None,
        glossary: GlossaryLike | None = None,
        keep: Sequence[str] | None = None,
    ) -> Path:
        """Translate the document ``path`` into ``out`` (written whole or not at all): .txt,
        .html, .srt, .po, .docx, .pptx, .odt, .odp or .epub (``aiayn.documents``: what each
        format translates, and how formatting is kept). Its texts, sentence by sentence, go
        through ``translate`` as any others do; search options, ``glossary`` and ``keep`` as
        ``translate``'s. A file that
        cannot be read (damaged, encrypted, over ``limits``, not its format) raises
        ``aiayn.documents.DocumentError`` naming the problem. Returns ``out``."""
        from aiayn import documents
        from aiayn.fileio import atomic_write

        path, out = Path(path), Path(out)
        limit = self.max_text_tokens
        opened, sentences = document_sentences(
            path, out, limits, lambda t: self.token_counts([t])[0] <= limit, keep
        )
        results = self.translate(
            sentences.texts, beam=beam, lenpen=lenpen, sampling=sampling,
            max_len_offset=max_len_offset, early_stop=early_stop, max_tokens=max_tokens,
            scores=False, alignment=documents.aligned(opened), glossary=glossary, keep=keep,
        ) if sentences.texts else []  # fmt: skip
        pairs = [(t.text, t.alignment or ()) for t in results]
        language = self.languages[1] if self.languages else None
        data = documents.save(opened, sentences, pairs, path.name, language)
        atomic_write(out, lambda p: p.write_bytes(data))
        return out

    @torch.no_grad()
    def score(
        self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64
    ) -> list[float]:
        """log P(target | source) of each pair, teacher-forced (forced decoding): the sum of
        the log-probabilities of the target's tokens and its eos."""
        sources, targets = text_list(sources, "sources"), text_list(targets, "targets")
        if len(sources) != len(targets):
            raise OptionError(
                f"{len(sources)} sources but {len(targets)} targets: give one target per source",
                "sources",
                "targets",
            )
        config = self.config
        src_ids, _ = decoding.source_ids(self.model, self.tokenizer, sources)
        tgt_ids = [x + [config.eos_id] for x in self.tokenizer.encode_target(targets)]
        limit = config.max_positions
        for i, x in enumerate(tgt_ids):
            if limit is not None and len(x) > limit:
                raise UserError(
                    f"targets[{i}]: {len(x)} tokens with eos; the model's learned positions "
                    f"end at max_len {limit}"
                )
        scores: list[float] = []
        for start in range(0, len(src_ids), batch_size):
            src = pad(src_ids[start : start + batch_size], config.pad_id).to(self.device)
            rows = tgt_ids[start : start + batch_size]
            tgt_in = pad([[config.bos_id] + x[:-1] for x in rows], config.pad_id)  # (B, T)
            tgt_out = pad(rows, config.pad_id).to(self.device)  # (B, T)
            logits = self.model(src, tgt_in.to(self.device))  # (B, T, V)
            log_probs = torch.log_softmax(logits.float(), -1).gather(2, tgt_out[..., None])
            real = tgt_out != config.pad_id  # (B, T)
            scores += (log_probs[..., 0].double() * real).sum(1).tolist()
        return scores

    def attention(
        self, text: str, *, beam: int = 1, lenpen: float = 0.6, max_len_offset: int = 50
    ) -> AttentionMap:
        """Translate ``text`` and return every layer's attention weights over that
        translation (encoder, decoder self- and cross-attention, Vaswani et al. 2017 §3.2)."""
        check_search(beam, lenpen, max_len_offset)
        (text,) = text_list([text], "text")
        return translation_attention(self.model, self.tokenizer, text, beam, lenpen, max_len_offset)
