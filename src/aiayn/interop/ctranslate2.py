"""CTranslate2 (Klein et al. 2020) as a decoding engine for aiayn's encoder-decoders, and as an
export format.

A model directory is exported as a Marian directory (``aiayn.interop.hf.export_hf``) and
converted by CTranslate2's own converter (``ctranslate2.converters.TransformersConverter``),
once: ``cached_model`` keeps the conversion in ``MODEL/.ctranslate2/KEY/`` (or in a cache
directory given, ``$AIAYN_CACHE_DIR``, or the user's cache where the model directory cannot be
written), KEY naming a digest of what it was made from (weights, config, tokenizer,
quantization), and checks every file of it against the size and SHA-256 it recorded before
each use: a damaged conversion is made again. ``CTranslate2Engine.search`` then decodes with
``ctranslate2.Translator`` and answers as ``aiayn.infer.translate.search`` does: an n-best
list of ``Hypothesis(tokens, score, log_prob)`` per sentence, in aiayn's token ids.

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
  ``BEAM_PATIENCE`` x ``beam`` hypotheses have finished (``early_stop``: ``beam``), and
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

import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import tempfile
import threading
import time
import warnings
from pathlib import Path

from aiayn.data.tokenizer import EOS, PAD, load_tokenizer
from aiayn.errors import OptionError, UserError, debugging, note
from aiayn.fileio import file_sha256, fsync_directory, replace_directory, write_json
from aiayn.infer.beam import Hypothesis, length_penalty
from aiayn.modeldir import CONFIG_FILE, HASH_KEY, WEIGHTS_FILE, load_config

INSTALL = "pip install 'aiayn[ctranslate2]'"
QUANTIZATIONS = ("int8",)
CACHE_DIR = ".ctranslate2"  # inside the model directory
CACHE_ENV = "AIAYN_CACHE_DIR"  # where conversions are cached, when no cache_dir is given
STAMP = "aiayn.json"  # in a converted model: what it was converted from, and its files
CONVERSION = 2  # the conversion's format: a cached conversion of another is converted anew
# A converted model holds a table of sinusoidal positions (CTranslate2 computes none past it):
# the model's max_len plus this many, so that a source cut to max_len tokens can be followed
# by an output of up to this many tokens more, as the torch engine's sinusoids allow.
EXTRA_POSITIONS = 1024
BEAM_PATIENCE = 2.0  # with lenpen > 0 and no early stop (CTranslate2Engine._beam_call)
FLOAT32_TINY = 2.0**-126  # float32's smallest normal number: the least top-p given to CTranslate2
SEED_LIMIT = 2**32  # ctranslate2.set_random_seed takes an unsigned 32-bit seed
VOCABULARIES = ("target_vocabulary", "shared_vocabulary")  # a converted model's, .json or .txt
SEARCH_OPTIONS = (
    "beam", "lenpen", "max_len_offset", "nbest", "early_stop", "sampling", "indices", "prefix",
    "scores",
)  # fmt: skip


def require_ctranslate2():
    """The ``ctranslate2`` module, or an error saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise UserError(f"the ctranslate2 engine needs CTranslate2: {INSTALL}") from None
    return ctranslate2


def _check_quantization(quantization: str | None) -> None:
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise UserError(
            f"quantization {quantization!r} has no CTranslate2 counterpart here; allowed: "
            f"{', '.join(QUANTIZATIONS)} (or none: float32)"
        )


def weights_sha256(model_dir: Path) -> str:
    """The SHA-256 of the model's weights file, checked against the one config.json records."""
    model_dir = Path(model_dir)
    path = model_dir / WEIGHTS_FILE
    if not path.is_file():
        raise UserError(f"{path}: no weights file in the model directory")
    digest = file_sha256(path)
    config = json.loads((model_dir / CONFIG_FILE).read_text())
    recorded = (config.get(HASH_KEY) or {}).get(WEIGHTS_FILE)
    if recorded is not None and recorded != digest:
        raise UserError(
            f"{path}: the weights are damaged or were replaced (SHA-256 {digest[:12]}..., but "
            f"{model_dir / CONFIG_FILE} records {recorded[:12]}...)"
        )
    return digest


def convert(
    model_dir: Path, out: Path, quantization: str | None = None, add_source_eos: bool = True
) -> dict:
    """Convert the aiayn encoder-decoder in ``model_dir`` into the CTranslate2 model ``out``
    (model.bin, shared_vocabulary.json, config.json) with CTranslate2's own converter.

    ``add_source_eos``: CTranslate2 appends eos to each source itself (so callers pass the
    sentencepiece pieces alone, as Argos Translate does); aiayn's models read sources ending
    in eos. The position table covers ``max_len + EXTRA_POSITIONS`` positions. The converter's
    and transformers' own warnings and progress bars are shown only when ``debugging()``.
    Returns the record written to ``out/aiayn.json``.
    """
    _check_quantization(quantization)
    ctranslate2 = require_ctranslate2()
    from ctranslate2.converters import TransformersConverter

    from aiayn.interop.hf import export_hf

    model_dir, out = Path(model_dir), Path(out)
    config = load_config(model_dir)
    if config.family != "encoder-decoder":
        raise UserError(
            f"{model_dir} holds an {config.family} model; the CTranslate2 engine and export "
            "take encoder-decoder (translation) models"
        )
    digest = weights_sha256(model_dir)
    with tempfile.TemporaryDirectory(prefix="aiayn-hf-") as hf:
        try:
            export_hf(model_dir, Path(hf))
        except ValueError as e:  # an option Marian (and so CTranslate2) does not have
            raise UserError(f"{model_dir}: {str(e).replace('Marian', 'CTranslate2')}") from None
        hf_config = json.loads((Path(hf) / "config.json").read_text())
        hf_config["max_position_embeddings"] = config.max_len + EXTRA_POSITIONS
        (Path(hf) / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        with _quiet_libraries():
            TransformersConverter(hf).convert(str(out), quantization=quantization, force=True)
    ct2_config = json.loads((out / "config.json").read_text())
    ct2_config["add_source_eos"] = add_source_eos
    (out / "config.json").write_text(json.dumps(ct2_config, indent=2) + "\n")
    record = {
        "weights_sha256": digest,
        "quantization": quantization,
        "add_source_eos": add_source_eos,
        "ctranslate2": ctranslate2.__version__,
    }
    (out / STAMP).write_text(json.dumps(record, indent=2) + "\n")
    return record


@contextlib.contextmanager
def _quiet_libraries():
    """transformers' warnings, log lines and progress bars hidden, unless ``debugging()``."""
    if debugging():
        yield
        return
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def cache_key(inputs: dict) -> str:
    """The cache entry's name: a digest of what the conversion is made from (``inputs``),
    then its quantization."""
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return f"{digest[:16]}-{inputs['quantization'] or 'float32'}"


def conversion_inputs(model_dir: Path, quantization: str | None) -> dict:
    """What a conversion of ``model_dir`` depends on: the weights, the model's config, the
    tokenizer, the quantization and the conversion's own format (``CONVERSION``)."""
    config = json.loads((model_dir / CONFIG_FILE).read_text())
    tokenizer = sorted(p for p in model_dir.iterdir() if p.name.startswith("tokenizer"))
    return {
        "conversion": CONVERSION,
        "weights_sha256": weights_sha256(model_dir),
        "model": config.get("model"),
        "tokenizer_sha256": {p.name: file_sha256(p) for p in tokenizer if p.is_file()},
        "quantization": quantization,
    }


def cache_root(model_dir: Path, cache_dir: Path | str | None = None) -> tuple[Path, bool]:
    """Where conversions of ``model_dir`` are cached, and whether that is the model's own
    cache. In order: ``cache_dir``; ``$AIAYN_CACHE_DIR``; ``MODEL/.ctranslate2`` where the
    model directory can be written; else the user's cache directory,
    ``$XDG_CACHE_HOME/aiayn/ctranslate2`` (default ``~/.cache/aiayn/ctranslate2``)."""
    if cache_dir is not None:
        return Path(cache_dir), False
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]), False
    own = model_dir / CACHE_DIR
    if (
        own.is_dir()
        and os.access(own, os.W_OK | os.X_OK)
        or os.access(model_dir, os.W_OK | os.X_OK)
    ):
        return own, True
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aiayn" / "ctranslate2", False


def cached_model(
    model_dir: Path, quantization: str | None = None, cache_dir: Path | str | None = None,
    *, again: bool = False,
) -> Path:  # fmt: skip
    """The CTranslate2 conversion of ``model_dir``, converted on first use and reused while
    what it was made from (``conversion_inputs``) stays the same.

    The cache lives in ``cache_root``. Before use, every file of a cached conversion is
    checked against the size and SHA-256 its stamp recorded: a damaged or incomplete one is
    converted again, with a warning naming it (``again``: convert again whatever the check
    says, for a conversion that does not load). A conversion is written beside its place and
    renamed into it, under a lock, so that processes converting at once leave one conversion
    and a reader never sees half of one. In the model's own cache, conversions of earlier
    weights are removed.
    """
    _check_quantization(quantization)
    model_dir = Path(model_dir)
    load_config(model_dir)  # a model directory, or an error naming what is missing
    inputs = conversion_inputs(model_dir, quantization)
    root, own = cache_root(model_dir, cache_dir)
    target = root / cache_key(inputs)
    if not again and not damage(target, inputs):
        return target
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / f".{target.name}.lock", "a")  # noqa: SIM115 (held until converted)
    except OSError as e:
        raise UserError(
            f"{root}: cannot write the CTranslate2 conversion there ({e.strerror or e}); give "
            f"a writable cache directory (--cache-dir, cache_dir=, or ${CACHE_ENV})"
        ) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be converting the same model
        problem = "" if again else damage(target, inputs)
        if not again and not problem:  # the other process's conversion
            return target
        if target.exists() and problem:
            warnings.warn(
                f"{target}: the cached CTranslate2 conversion is damaged ({problem}); "
                "converting it again",
                stacklevel=2,
            )
        if own:
            _remove_stale(root, inputs)
        _convert_into(model_dir, target, quantization, inputs)
    return target


def _remove_stale(root: Path, inputs: dict) -> None:
    """Remove the conversions in ``root`` of other weights, configs, tokenizers or formats
    (those of another quantization of the same model stay)."""
    same = {k: v for k, v in inputs.items() if k != "quantization"}
    for old in root.iterdir():
        if old.is_dir() and not old.name.startswith("."):
            theirs = _stamp(old).get("inputs")
            if (
                not isinstance(theirs, dict)
                or {k: v for k, v in theirs.items() if k != "quantization"} != same
            ):
                shutil.rmtree(old, ignore_errors=True)


def _convert_into(model_dir: Path, target: Path, quantization: str | None, inputs: dict) -> None:
    """Convert into a sibling of ``target``, stamp it, and rename it into place (a damaged
    ``target`` is moved aside first, then removed)."""
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        convert(model_dir, work / "model", quantization, add_source_eos=False)
        record = json.loads((work / "model" / STAMP).read_text())
        record.update(inputs=inputs, files=file_digests(work / "model"))
        write_json(work / "model" / STAMP, record)
        if target.exists():
            os.replace(target, work / "damaged")
        os.replace(work / "model", target)
        fsync_directory(target.parent)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    note(
        f"converted {model_dir} for CTranslate2 ({quantization or 'float32'}) in "
        f"{time.perf_counter() - start:.1f} s: {target}"
    )


def file_digests(directory: Path) -> dict[str, dict]:
    """Size and SHA-256 of each file of a conversion, its stamp left out."""
    return {
        p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)}
        for p in sorted(directory.iterdir())
        if p.is_file() and p.name != STAMP
    }


def damage(directory: Path, inputs: dict) -> str:
    """What is wrong with the cached conversion ``directory`` ("" when nothing): absent, made
    from other inputs, or a file missing, of another size or of other bytes than its stamp
    records."""
    if not directory.is_dir():
        return "absent"
    stamp = _stamp(directory)
    if stamp.get("inputs") != inputs or not isinstance(stamp.get("files"), dict):
        return f"{STAMP} is missing, damaged or records other inputs"
    for name, expected in sorted(stamp["files"].items()):
        path = directory / name
        try:
            size = path.stat().st_size
        except OSError:
            return f"{name} is missing"
        if not isinstance(expected, dict) or size != expected.get("size"):
            return f"{name} has {size} bytes, not the {expected.get('size')} recorded"
        if file_sha256(path) != expected.get("sha256"):
            return f"{name} does not have the SHA-256 recorded"
    extra = {p.name for p in directory.iterdir()} - set(stamp["files"]) - {STAMP}
    if extra:
        return f"unexpected files: {', '.join(sorted(extra))}"
    return ""


def _stamp(directory: Path) -> dict:
    try:
        data = json.loads((Path(directory) / STAMP).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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


class CTranslate2Engine:
    """Decodes an aiayn encoder-decoder with ``ctranslate2.Translator``.

    ``search`` has the meaning and the answer of ``aiayn.infer.translate.search`` (which
    hands it the work when given this engine in place of a model); ``config`` and
    ``tokenizer`` are the model directory's. ``quantize`` "int8" decodes with CTranslate2's
    int8; ``device`` is a torch device ("cpu", "cuda", "cuda:1"); ``threads`` 0 lets
    CTranslate2 choose.
    """

    name = "ctranslate2"

    def __init__(
        self,
        model_dir: Path,
        *,
        quantize: str | None = None,
        device: str = "cpu",
        threads: int = 0,
        cache_dir: Path | None = None,
    ) -> None:
        ctranslate2 = require_ctranslate2()
        self.model_dir = Path(model_dir)
        self.config = load_config(self.model_dir)
        self.tokenizer = load_tokenizer(self.model_dir)
        self.quantization = quantize
        # CTranslate2 has positions up to its table's end: no output runs past it
        self.max_length = self.config.max_len + EXTRA_POSITIONS
        kind, index = _device(device)
        self._options = dict(
            device=kind,
            device_index=index,
            compute_type="int8" if quantize == "int8" else "float32",
            inter_threads=1,
            intra_threads=threads,
        )
        self.path = cached_model(self.model_dir, quantize, cache_dir)
        try:
            self.translator = ctranslate2.Translator(str(self.path), **self._options)
        except (RuntimeError, ValueError, OSError) as e:  # verified files that do not load
            warnings.warn(
                f"{self.path}: CTranslate2 cannot load the cached conversion ({e}); "
                "converting it again",
                stacklevel=2,
            )
            self.path = cached_model(self.model_dir, quantize, cache_dir, again=True)
            try:
                self.translator = ctranslate2.Translator(str(self.path), **self._options)
            except (RuntimeError, ValueError, OSError) as e:
                raise UserError(
                    f"{self.model_dir}: CTranslate2 cannot load its conversion of the model "
                    f"({self.path}): {e}"
                ) from None
        self._pieces = [self.tokenizer.id_to_piece(i) for i in range(self.tokenizer.vocab_size)]
        self._outputs = output_vocabulary_size(self.path) or len(self._pieces)
        self._ids: dict[str, int] = {}
        for i, piece in enumerate(self._pieces):
            self._ids.setdefault(piece, i)
        self._eos = self._pieces[EOS]
        self._seed_lock = threading.Lock()
        self._local = threading.local()  # each thread's current search (its prefixes)

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
        results = self.translator.translate_batch(
            sources, beam_size=1, length_penalty=0.0, **common
        )
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
        results = self.translator.translate_batch(
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
        so a seeded call runs on a translator of its own (an unseeded one on the engine's)."""
        import ctranslate2

        options, copies = self._sampling(sampling, nbest)
        out: list = [None] * len(sources)
        with self._seed_lock:
            translator = self.translator  # seed None: a fresh draw each call
            if sampling.seed is not None:
                ctranslate2.set_random_seed(sampling.seed)
                translator = ctranslate2.Translator(str(self.path), **self._options)
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
        results = self.translator.score_batch(sources, body, max_input_length=0)
        scores = []
        for tokens, result in zip(targets, results, strict=True):
            log_probs = list(result.log_probs)  # one per target token, then eos
            ended = bool(tokens) and tokens[-1] == EOS
            scores.append(float(sum(log_probs if ended else log_probs[:-1])))
        return scores


def output_vocabulary_size(path: Path) -> int | None:
    """How many tokens the converted model ``path`` can output (its target vocabulary, or the
    one it shares with the source); None where it holds neither file."""
    for name in VOCABULARIES:
        if (path / f"{name}.json").is_file():
            return len(json.loads((path / f"{name}.json").read_text(encoding="utf-8")))
        if (path / f"{name}.txt").is_file():
            return len((path / f"{name}.txt").read_text(encoding="utf-8").splitlines())
    return None


def sentencepiece_files(tokenizer) -> dict[str, bytes]:
    """The sentencepiece model(s) a CTranslate2 user tokenizes with: one shared model
    (``sentencepiece.model``), or Marian's source and target models."""
    from aiayn.data.marian_tokenizer import SOURCE_SPM, TARGET_SPM, MarianTokenizer

    if isinstance(tokenizer, MarianTokenizer):
        if tokenizer.source_proto == tokenizer.target_proto:
            return {"sentencepiece.model": tokenizer.source_proto}
        return {SOURCE_SPM: tokenizer.source_proto, TARGET_SPM: tokenizer.target_proto}
    proto = getattr(tokenizer, "proto", None)
    if proto is None:
        raise UserError(
            f"the tokenizer ({type(tokenizer).__name__}) is not a sentencepiece model; "
            "CTranslate2 and Argos Translate packages carry sentencepiece models"
        )
    return {"sentencepiece.model": proto}


def export_ctranslate2(
    model_dir: Path, out: Path, quantization: str | None = None, force: bool = False
) -> dict:
    """Write ``model_dir`` as a CTranslate2 model directory ``out`` (replaced whole, with
    ``force``: ``aiayn.fileio.replace_directory``): the converted model, which appends eos
    to each source itself (``add_source_eos``), and the sentencepiece model(s) that cut text
    into its tokens::

        sp = sentencepiece.SentencePieceProcessor(model_file=f"{out}/sentencepiece.model")
        translator = ctranslate2.Translator(out)
        result = translator.translate_batch([sp.encode(text, out_type=str)])
        sp.decode(result[0].hypotheses[0])
    """
    model_dir, out = Path(model_dir), Path(out)
    files = sentencepiece_files(load_tokenizer(model_dir))
    with replace_directory(out, force, keep=[model_dir]) as new:
        record = convert(model_dir, new, quantization, add_source_eos=True)
        for name, data in files.items():
            (new / name).write_bytes(data)
    return {"format": "ctranslate2", "out": str(out), **record, "tokenizer": sorted(files)}
