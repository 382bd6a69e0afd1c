"""The CTranslate2 engine: ``CTranslate2Engine`` decodes an aiayn encoder-decoder with
``ctranslate2.Translator``, on the conversion ``cached_model`` keeps (``cache``), and answers
as ``aiayn.infer.translate.search`` does: an n-best list of ``Hypothesis(tokens, score,
log_prob)`` per sentence, in aiayn's token ids. This module holds the engine object (device,
loading, token ids <-> CTranslate2's token strings, the options' checks); the searches it
runs are its base class's, ``searches.Searches``.

How the options map (``CTranslate2Engine.search``):

* the length limit (source length + ``max_len_offset``, per sentence) is CTranslate2's
  ``max_decoding_length``, at most the converted position table (``max_len`` +
  ``EXTRA_POSITIONS``); eos may come first (``min_decoding_length`` 0), as in aiayn;
* greedy search (beam 1) is CTranslate2's, token for token; the score is the log-probability
  (NaN with ``scores`` False, as with the torch engine: CTranslate2 is not asked for scores);
* beam search keeps aiayn's scores: log P / lp(Y), lp(Y) = ((5 + |Y|) / 6) ** lenpen (GNMT).
  CTranslate2 normalises by |Y| ** lenpen instead, so its finished hypotheses (all ``beam`` of
  them) are rescored with GNMT's penalty. Its stopping rule differs from aiayn's exact search:
  with lenpen 0 it stops when the best candidate of a step is eos (the best hypothesis is then
  the exact one; further n-best entries may differ); with lenpen > 0 it stops once
  ``searches.BEAM_PATIENCE`` x ``beam`` hypotheses have finished (``early_stop``: ``beam``), and
  aiayn's best hypothesis is found when it is among them;
* sampling is CTranslate2's sampler (temperature, top-k, top-p), seeded with
  ``ctranslate2.set_random_seed``: the same sentences with the same seed give the same samples
  (with the torch engine a sentence's samples depend only on the seed and its index); each
  sample is scored by its log-probability under the model, as in aiayn. Settings CTranslate2
  takes otherwise are given with the torch engine's meaning (``CTranslate2Engine._sampling``):
  greedy (temperature 0, top-k 1) makes ``nbest`` copies of the one greedy output, a top-k of
  the whole vocabulary or more is no top-k filter, a top-p too small for float32 is float32's
  smallest normal number (either keeps only the most likely token); a seed must be below
  2**32 (``SEED_LIMIT``);
* an option without a counterpart is an error naming it.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from pathlib import Path

from aiayn.data.tokenizer import EOS, PAD
from aiayn.errors import OptionError, UserError
from aiayn.infer.beam import Hypothesis
from aiayn.infer.cores import usable_cores
from aiayn.interop.ctranslate2.cache import cached_model
from aiayn.interop.ctranslate2.conversion import (
    EXTRA_POSITIONS,
    CannotRunHere,
    require_ctranslate2,
)
from aiayn.interop.ctranslate2.searches import Searches
from aiayn.modeldir import ModelDir

SEED_LIMIT = 2**32  # ctranslate2.set_random_seed takes an unsigned 32-bit seed
# seconds without overlapping searches before one takes every thread: under a load's
# clients searches overlap every few milliseconds; a lone client after one waits this long
ALONE_AFTER = 0.25
VOCABULARIES = ("target_vocabulary", "shared_vocabulary")  # a converted model's, .json or .txt
SEARCH_OPTIONS = (
    "beam", "lenpen", "max_len_offset", "nbest", "early_stop", "sampling", "indices", "prefix",
    "scores",
)  # fmt: skip


def _device(device) -> tuple[str, int]:
    """CTranslate2's (device, device_index) of a torch device: cpu or cuda only."""
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda"):
        raise UserError(f"device {device!r}: CTranslate2 runs on cpu or cuda (e.g. cuda:0)")
    index = parsed.index or 0
    if parsed.type == "cuda" and index >= require_ctranslate2().get_cuda_device_count():
        raise OptionError(
            f"device {parsed}: this CTranslate2 finds no such CUDA GPU (a build without CUDA, "
            "or no driver); use device cpu, or engine torch",
            "device",
            "engine",
        )
    return parsed.type, index


class CTranslate2Engine(Searches):
    """Decodes an aiayn encoder-decoder with ``ctranslate2.Translator``.

    ``search`` has the meaning and the answer of ``aiayn.infer.translate.search`` (which
    hands it the work when given this engine in place of a model); ``config`` and
    ``tokenizer`` are the model directory's. ``quantize`` "int8" decodes with CTranslate2's
    int8; ``device`` is a torch device ("cpu", "cuda", "cuda:1"); ``threads`` 0 lets
    CTranslate2 choose; ``decoders``: how many threads may search at once, each on a
    decoder of its own (CTranslate2's ``inter_threads``, sharing the weights) with
    ``threads`` threads. With more than one on a CPU, a search takes them all while none
    has overlapped another for ``ALONE_AFTER`` seconds: a second ``ctranslate2.Translator``
    (a second copy of the weights) runs it on ``threads`` x ``decoders`` threads (at most the
    cores this process may use), so that a lone client is answered on every thread, and
    clients that come together share the cores, each batch on its own decoder (a search on
    every thread beside another would have more threads than cores, each waiting for the
    others).
    """

    name = "ctranslate2"

    def __init__(
        self,
        model_dir: ModelDir | Path,
        *,
        quantize: str | None = None,
        device: str = "cpu",
        threads: int = 0,
        decoders: int = 1,
        cache_dir: Path | None = None,
    ) -> None:
        require_ctranslate2()  # a clear error where it is not installed
        directory = ModelDir.open(model_dir)
        self.model_dir, self.config = directory.path, directory.config
        self.tokenizer = directory.tokenizer()
        self.quantization = quantize
        # CTranslate2 has positions up to its table's end: no output runs past it
        self.max_length = self.config.max_len + EXTRA_POSITIONS
        kind, index = _device(device)
        self._options = dict(
            device=kind,
            device_index=index,
            compute_type="int8" if quantize == "int8" else "float32",
            inter_threads=decoders,
            intra_threads=threads,
        )
        self.path = cached_model(directory, quantize, cache_dir)
        try:
            self.translator = self._translator()
        except (RuntimeError, ValueError, OSError) as e:  # verified files that do not load
            warnings.warn(
                f"{self.path}: CTranslate2 cannot load the cached conversion ({e}); "
                "converting it again",
                stacklevel=2,
            )
            self.path = cached_model(directory, quantize, cache_dir, again=True)
            try:
                self.translator = self._translator()
            except (RuntimeError, ValueError, OSError) as e:
                raise CannotRunHere(
                    f"{self.model_dir}: CTranslate2 cannot load its conversion of the model "
                    f"({self.path}): {e}"
                ) from None
        self._alone = None  # the translator of a search that runs alone (decoders > 1, CPU)
        if decoders > 1 and kind == "cpu":  # every thread, at most every usable core
            cores = usable_cores()
            every = min(threads * decoders, cores) if threads else cores
            self._alone = self._translator(inter_threads=1, intra_threads=every)
        self._running, self._running_lock = 0, threading.Lock()  # searches under way
        self._overlapped = float("-inf")  # when a search last began beside another
        self._pieces = [self.tokenizer.id_to_piece(i) for i in range(self.tokenizer.vocab_size)]
        self._outputs = output_vocabulary_size(self.path) or len(self._pieces)
        self._ids: dict[str, int] = {}
        for i, piece in enumerate(self._pieces):
            self._ids.setdefault(piece, i)
        self._eos = self._pieces[EOS]
        self._seed_lock = threading.Lock()
        self._local = threading.local()  # each thread's current search (its prefixes)
        if kind == "cuda":
            self._check_decodes(f"cuda:{index}")

    def _check_decodes(self, device) -> None:
        """One search of one token, so that a CTranslate2 that cannot decode on ``device``
        fails here, when the model loads, and not on every request after: it finds a GPU by
        the driver alone and loads cuBLAS at its first search, so a build for another CUDA
        (CTranslate2 4's wheels want CUDA 12's libraries) fails only there."""
        import ctranslate2

        try:
            self.translator.translate_batch([[self._eos]], max_decoding_length=1)
        except RuntimeError as e:
            raise CannotRunHere(
                f"{self.model_dir}: CTranslate2 {ctranslate2.__version__} cannot decode on "
                f"{device}: {e}; use device cpu, or engine torch, or install the CUDA "
                "libraries this CTranslate2 was built for"
            ) from None

    def _translator(self, **options):
        """A ``ctranslate2.Translator`` of the conversion with the engine's options and
        ``options``. Building one sets OpenMP's thread count of the calling thread to its
        own (a runtime torch shares): torch's count there is put back."""
        import ctranslate2
        import torch

        threads = torch.get_num_threads()
        try:
            return ctranslate2.Translator(str(self.path), **{**self._options, **options})
        finally:
            torch.set_num_threads(threads)

    @property
    def _decoding(self):
        """The translator of the search this thread runs (see the class)."""
        return getattr(self._local, "translator", None) or self.translator

    @property
    def _heads(self) -> list[list[str]] | None:
        """The target prefixes of the search this thread runs (None: none)."""
        return getattr(self._local, "heads", None)

    @_heads.setter
    def _heads(self, heads: list[list[str]] | None) -> None:
        self._local.heads = heads

    # --- token ids <-> CTranslate2's token strings -------------------------------------

    def _source(self, row) -> list[str]:
        return [self._pieces[t] for t in row if t != PAD]

    def _target(self, pieces: list[str]) -> list[int]:
        unk = self._ids.get("<unk>", 1)
        return [EOS if p == self._eos else self._ids.get(p, unk) for p in pieces]

    # --- search --------------------------------------------------------------------------

    def search(
        self,
        src,
        beam: int = 1,
        lenpen: float = 0.6,
        max_len_offset: int = 50,
        nbest: int = 1,
        early_stop: bool = False,
        sampling=None,
        indices: list[int] | None = None,
        prefix=None,
        scores: bool = True,
        **other,
    ) -> list[list[Hypothesis]]:
        """n-best lists per sentence for sources (B, S) of aiayn ids (a padded tensor or
        lists, each ending in eos), as ``aiayn.infer.translate.search``; see the module
        docstring for how each option maps. ``indices`` name the sentences for the torch
        engine's seeds; CTranslate2's sampler has no such seeds and ignores them. ``prefix``
        (B, P): target tokens every hypothesis begins with (CTranslate2's ``target_prefix``),
        counted in the length limit; the hypotheses are scored again by the model over the
        whole target (CTranslate2's scores leave the prefix out). ``scores`` False: greedy
        hypotheses are not scored (NaN), as in ``aiayn.infer.translate.search``."""
        with self._running_lock:  # alone of late: on every thread (the class)
            self._running += 1
            now = time.monotonic()
            if self._running > 1:
                self._overlapped = now
            alone = now - self._overlapped >= ALONE_AFTER
        self._local.translator = self._alone if alone else None
        try:
            return self._search(
                src, beam, lenpen, max_len_offset, nbest, early_stop, sampling, prefix, scores,
                other,
            )  # fmt: skip
        finally:
            with self._running_lock:
                self._running -= 1

    def _search(
        self, src, beam, lenpen, max_len_offset, nbest, early_stop, sampling, prefix, scores, other
    ) -> list[list[Hypothesis]]:
        if other:
            name = sorted(other)[0]
            raise UserError(
                f"option {name!r} has no CTranslate2 counterpart; the ctranslate2 engine "
                f"takes {', '.join(SEARCH_OPTIONS)}"
            )
        if beam < 1 or nbest < 1 or max_len_offset < 0:
            raise ValueError(
                f"beam and nbest must be >= 1 and max_len_offset >= 0, got beam={beam}, "
                f"nbest={nbest}, max_len_offset={max_len_offset}"
            )
        rows = src.tolist() if hasattr(src, "tolist") else [list(r) for r in src]
        sources = [self._source(r) for r in rows]
        heads = None
        if prefix is not None:
            heads = [[self._pieces[t] for t in r] for r in prefix.tolist()] or None
        p = len(heads[0]) if heads else 0
        limits = [min(max(len(s) + max_len_offset, p + 1), self.max_length) for s in sources]
        self._heads = heads  # the calls below pass them as target_prefix
        if sampling is not None:
            if beam != 1:
                raise ValueError(f"sampling draws one token at a time: beam must be 1, got {beam}")
            if early_stop:
                raise ValueError("early_stop is for beam search: use it without sampling")
            if sampling.seed is not None and not 0 <= sampling.seed < SEED_LIMIT:
                raise OptionError(
                    f"seed must be an integer in [0, {SEED_LIMIT - 1}] with engine ctranslate2 "
                    f"(CTranslate2's random generator takes 32 bits), got {sampling.seed}",
                    "seed",
                    "engine",
                )
            return self._sample(sources, limits, nbest, sampling)
        if nbest > beam:
            raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({beam})")
        if beam == 1:
            return self._greedy(sources, limits, scores)
        return self._beam(sources, limits, beam, lenpen, nbest, early_stop)


def output_vocabulary_size(path: Path) -> int | None:
    """How many tokens the converted model ``path`` can output (its target vocabulary, or the
    one it shares with the source); None where it holds neither file."""
    for name in VOCABULARIES:
        if (path / f"{name}.json").is_file():
            return len(json.loads((path / f"{name}.json").read_text(encoding="utf-8")))
        if (path / f"{name}.txt").is_file():
            return len((path / f"{name}.txt").read_text(encoding="utf-8").splitlines())
    return None
