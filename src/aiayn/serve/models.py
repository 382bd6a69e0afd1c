"""The models a server holds: each an API object (``aiayn.load``) with its name and languages:
an aiayn model directory, or another toolkit's model served as it is (an Argos Translate
package, a CTranslate2 model directory: ``aiayn.interop.foreign``, ``aiayn.api.package``).

Every method that computes runs on the model's worker thread (see ``batching``) and calls the
API object, as the command line does; nothing here tokenizes or decodes on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiayn
from aiayn.api import Classifier, Generator, Translation, Translator
from aiayn.api.device import placement
from aiayn.api.engine import check_engine_name
from aiayn.api.generator import CompletionText
from aiayn.api.load import check_engine, foreign, kind, load_foreign
from aiayn.api.package import PackageTranslator
from aiayn.infer.attention import AttentionMap
from aiayn.infer.classify import classifier_labels
from aiayn.modeldir import WEIGHTS_FILE, ModelDir


def default_name(path: Path) -> str:
    """The directory's name (an archive's: its name without .argosmodel); a run's (or an
    Argos Translate package's) ``model/`` directory takes the run's (the package's) name."""
    path = path.resolve()
    if path.is_file():
        return path.stem
    return path.parent.name if path.name == "model" else path.name


@dataclass(frozen=True)
class ModelSpec:
    """Where a served model lives and what it is called; ``languages`` overrides run.json;
    ``quantize`` ("int8") quantizes a float model's linear layers as it loads; ``engine``
    "auto" (CTranslate2 for greedy and beam search where installed) or "ctranslate2"
    translates with CTranslate2 (``aiayn.load``'s engine); ``members``: further
    translators decoded with the one in ``path`` as an ensemble (their per-step probabilities
    averaged); ``device`` and ``dtype``: where the model runs and its weights' dtype
    (``aiayn.load``'s)."""

    path: Path
    name: str
    languages: tuple[str, ...] | None = None
    quantize: str | None = None
    engine: str = "auto"
    cache_dir: Path | None = None  # the ctranslate2 engine's cache (aiayn.load's cache_dir)
    members: tuple[Path, ...] = ()
    device: str = "cpu"  # auto, cpu, cuda or cuda:N
    dtype: str = "float32"  # float32, bfloat16 or float16


def check_spec(spec: ModelSpec) -> str:
    """Check a model directory without loading its weights; returns its family."""
    if foreign(spec.path):
        _foreign(spec)
        return "encoder-decoder"
    return _opened(spec)[0].config.family


def _foreign(spec: ModelSpec):
    """The Argos Translate package or CTranslate2 model of ``spec``, read and checked
    without loading its weights (``aiayn.interop.foreign.ForeignModel``)."""
    from aiayn.interop.ctranslate2.reader import OTHER_SPECS, TRANSFORMER_SPECS
    from aiayn.interop.foreign import open_foreign

    if spec.members:
        raise ValueError(
            f"{spec.path}: another toolkit's model (an Argos Translate package or a CTranslate2 "
            "model) is served alone, not in an ensemble"
        )
    if spec.languages is not None and (len(spec.languages) != 2 or not all(spec.languages)):
        raise ValueError(
            f"--languages {'-'.join(spec.languages)!r} for {spec.name}: a translator takes "
            "SRC-TGT, e.g. de-en"
        )
    if spec.quantize is not None and spec.engine != "torch":
        raise ValueError(
            f"--quantize: {spec.path} is decoded by CTranslate2 in the type its weights were "
            "saved in (int8 where they are); --quantize applies with --engine torch (aiayn's "
            "import of it)"
        )
    check_engine_name(spec.engine)
    placement(spec.device, "float32", engine="ctranslate2" if spec.engine != "torch" else "torch")
    languages = tuple(spec.languages) if spec.languages is not None else None
    model = open_foreign(spec.path, spec.cache_dir, languages)
    spec_name = model.header.spec  # model.bin's header read now: a broken one named at start
    if spec_name not in TRANSFORMER_SPECS:
        what = OTHER_SPECS.get(spec_name, "not a translation model")
        raise ValueError(f"{model.model_dir}: a CTranslate2 {spec_name} ({what}), not a translator")
    if model.languages is None:
        raise ValueError(
            f"{spec.path}: a CTranslate2 model does not say its languages; give them with "
            "--languages SRC-TGT"
        )
    return model


class ModelKind:
    """What a model's ``family`` and ``labels`` make it: a translator (encoder-decoder), a
    classifier (encoder-only with class names)."""

    family: str
    labels: Sequence[str] | None

    @property
    def is_translator(self) -> bool:
        return self.family == "encoder-decoder"

    @property
    def is_classifier(self) -> bool:
        return self.family == "encoder-only" and bool(self.labels)


@dataclass(frozen=True)
class ModelFacts(ModelKind):
    """What a served model's directory says before its weights load: enough to list it, to
    route requests to it by name or by language pair, and to check the server's glossary
    for it (``model_facts``)."""

    family: str
    languages: tuple[str, ...] | None
    labels: tuple[str, ...] | None  # a classifier's class names
    vocab_size: int
    max_len: int
    quantization: str | None  # as it will load: --quantize's, or the directory's own
    created: int  # when the weights were written (Unix time), OpenAI's "created"
    language_names: Mapping[str, str] = field(default_factory=dict)  # a package's metadata's
    # the modules its load imports that a server may not have imported yet (CTranslate2, a
    # package's sentence splitter: spaCy's import alone takes 0.5-2 s)
    libraries: tuple[str, ...] = ()


def model_facts(spec: ModelSpec) -> ModelFacts:
    """``spec``'s directory checked as ``check_spec`` checks it, and what it says of the
    model (its languages: ``--languages``, else a translator's run.json ``data.src_lang`` and
    ``data.tgt_lang``, as ``Translator.languages`` reads them)."""
    if foreign(spec.path):
        return _foreign_facts(spec)
    directory = _opened(spec)[0]
    config = directory.config
    labels = None
    if kind(config) == "encoder-only classifier":
        labels = tuple(classifier_labels(directory, config.n_classes))
    languages = spec.languages
    data = directory.run.get("data", {})
    if languages is None and config.family == "encoder-decoder" and "src_lang" in data:
        if data.get("task", "translation") == "translation":
            languages = (data["src_lang"], data["tgt_lang"])
    return ModelFacts(
        family=config.family,
        languages=None if languages is None else tuple(languages),
        labels=labels,
        vocab_size=config.vocab_size,
        max_len=config.max_len,
        quantization=spec.quantize or directory.quantization,
        created=int((Path(spec.path) / WEIGHTS_FILE).stat().st_mtime),
    )


def _foreign_facts(spec: ModelSpec) -> ModelFacts:
    """``model_facts`` of an Argos Translate package or a CTranslate2 model."""
    import torch

    from aiayn.interop.ctranslate2.direct import MAX_INPUT_LENGTH

    model = _foreign(spec)
    tokenizer = model.tokenizer()
    int8 = any(v.dtype == torch.int8 for v in model.header.variables.values())
    return ModelFacts(
        family="encoder-decoder",
        languages=model.languages,
        labels=None,
        vocab_size=tokenizer.vocab_size,
        max_len=min(MAX_INPUT_LENGTH, model.max_positions or MAX_INPUT_LENGTH),
        quantization=spec.quantize if spec.engine == "torch" else ("int8" if int8 else None),
        created=model.created,
        language_names=dict(model.language_names),
        libraries=("ctranslate2", *model.libraries),
    )


def _opened(spec: ModelSpec) -> list[ModelDir]:
    """The model directories of ``spec`` (its own, then its ensemble's members), checked
    without loading their weights."""
    directories = [ModelDir(path) for path in (spec.path, *spec.members)]
    config = directories[0].config
    check_engine(spec.engine, config, spec.path)
    for directory in directories:  # this machine runs it so
        int8 = spec.quantize or directory.quantization
        placement(spec.device, spec.dtype, quantize=int8, engine=spec.engine)
    for directory in directories:
        if not directory.has_tokenizer:
            raise FileNotFoundError(
                f"{directory.path}: no tokenizer (tokenizer.model or tokenizer.json)"
            )
    if spec.members:
        if spec.engine == "ctranslate2":
            raise ValueError(f"{spec.name}: an ensemble decodes with the torch engine")
        for directory in directories:
            if directory.config.family != "encoder-decoder":
                raise ValueError(
                    f"{directory.path}: an ensemble is of translators (encoder-decoder models)"
                )
    if kind(config) == "encoder-only classifier":
        classifier_labels(directories[0], config.n_classes)  # as many names as classes
    if spec.languages is not None:
        want = 2 if config.family == "encoder-decoder" else 1
        if len(spec.languages) != want or not all(spec.languages):
            form = "SRC-TGT, e.g. de-en" if want == 2 else "one code, e.g. en"
            raise ValueError(
                f"--languages {'-'.join(spec.languages)!r} for {spec.name}: a "
                f"{config.family} model takes {form}"
            )
    return directories


class ServedModel(ModelKind):
    """An API object (``api``: a Translator, Generator, Classifier or Encoder) with what the
    endpoints need to know about it: its name, languages and labels."""

    def __init__(self, spec: ModelSpec, decoders: int = 1) -> None:
        """Load ``spec``'s model for ``decoders`` threads decoding at once."""
        self.name, self.path = spec.name, Path(spec.path)
        self.members = [Path(p) for p in spec.members]
        if foreign(spec.path):
            self.api = load_foreign(
                spec.path,
                quantize=spec.quantize,
                device=spec.device,
                dtype=spec.dtype,
                engine=spec.engine,
                cache_dir=spec.cache_dir,
                decoders=decoders,
                languages=None if spec.languages is None else tuple(spec.languages),
            )
            api = self.api
            created = (
                api.foreign if isinstance(api, PackageTranslator) else _foreign(spec)
            ).created
        else:
            directories = _opened(spec)
            self.api = aiayn.load(
                directories if self.members else directories[0],
                quantize=spec.quantize,
                device=spec.device,
                dtype=spec.dtype,
                engine=spec.engine,
                cache_dir=spec.cache_dir,
                decoders=decoders,
            )
            created = int((self.path / WEIGHTS_FILE).stat().st_mtime)
        if isinstance(self.api, Translator) and self.api.auto:
            self.api.fast_decoder()  # converted now, not on the first request
        self.engine = self.api.engine if isinstance(self.api, Translator) else "torch"
        self.engines = (
            self.api.engines
            if isinstance(self.api, Translator)
            else {"greedy": "torch", "beam": "torch", "other": "torch"}
        )
        self.config = self.api.config
        self.family = self.config.family
        self.labels: list[str] | None = (
            self.api.labels if isinstance(self.api, Classifier) else None
        )
        self.context = self.api.context if isinstance(self.api, Generator) else None
        self.languages = spec.languages
        if self.languages is None and isinstance(self.api, Translator):
            self.languages = self.api.languages
        self.parameters = self.api.parameters
        # OpenAI's "created": when the weights were written (Unix time), not when they loaded
        self.created = created
        # an Argos Translate package's own sentence splitter (None: aiayn's splitting)
        self.split_sentences = getattr(self.api, "split_sentences", None)
        self.package = isinstance(self.api, PackageTranslator)

    @property
    def max_text_tokens(self) -> int:
        """The longest text (in tokens, before eos) the model reads whole."""
        return self.api.max_text_tokens

    def token_counts(self, texts: list[str]) -> list[int]:
        return self.api.token_counts(texts)

    def describe(self) -> dict:
        return {
            "id": self.name,
            "object": "model",
            "created": self.created,
            "owned_by": "aiayn",
            "family": self.family,
            "parameters": self.parameters,
            "vocab_size": self.config.vocab_size,
            "max_len": self.config.max_len,
            "languages": list(self.languages) if self.languages else None,
            "labels": self.labels,
            "quantization": self.api.quantization,
            "engine": self.engine,
            "engines": self.engines,  # under --engine auto: greedy, beam search, the rest
            "device": str(self.api.device),
            "dtype": self.api.dtype,
            # the members' names, never the host's directories (this route takes no key)
            "ensemble": [default_name(p) for p in (self.path, *self.members)]
            if self.members
            else None,
        }

    # --- run on the worker thread -------------------------------------------------------

    def translate(self, texts: list[str], **options) -> list[Translation]:
        """The API's ``translate``; ``beam`` 0 is the model's own search (``--beam 0``, the
        default): Argos Translate's for a package, greedy search (or a beam of ``nbest``)
        for aiayn's models."""
        if options.get("beam") == 0:
            own = None if self.package else max(1, options.get("nbest", 1))
            options = {**options, "beam": own}
        return self.api.translate(texts, **options)

    def classify(self, texts: list[str]) -> list[list[float]]:
        return self.api.probabilities(texts).tolist()

    def embed(self, texts: list[str], normalize: bool = False) -> list[list[float]]:
        return self.api.embed(texts, normalize=normalize).tolist()

    def embed_ids(self, ids: list[list[int]], normalize: bool = False) -> list[list[float]]:
        return self.api.embed_ids(ids, normalize=normalize).tolist()

    def attention(self, text: str, **options) -> AttentionMap:
        return self.api.attention(text, **options)

    def prompt_ids(self, prompt: str) -> list[int]:
        return self.api.prompt_ids(prompt)

    def text_of(self, ids: list[int]) -> str:
        """The text token ``ids`` spell."""
        return self.api.tokenizer.decode([ids])[0]

    def complete(
        self,
        prompt: list[int],
        max_tokens: int,
        temperature: float,
        top_k: int,
        top_p: float,
        seed: int | None,
        emit: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        *,
        stop: tuple[str, ...] = (),
    ) -> tuple[str, int, str]:
        """Sample a continuation of ``prompt``: (text, tokens generated, finish reason).

        ``stop``: strings that end it before them; ``emit`` receives the text as it grows
        (whole characters only); a set ``cancel`` ends the generation after the current
        token (the client went away). ``top_k`` 0 is no top-k filter (OpenAI's convention).
        """
        sampling = aiayn.Sampling(temperature, top_k or None, top_p, seed)
        stream = self.api.stream(prompt, max_new_tokens=max_tokens, sampling=sampling, stop=stop)
        for delta in stream:
            if emit is not None and delta:
                emit(delta)
            if cancel is not None and cancel.is_set():
                break
        rest = stream.finish()
        if emit is not None and rest:
            emit(rest)
        return stream.text, len(stream.tokens), stream.finish_reason


__all__ = ["CompletionText", "ModelFacts", "ModelSpec", "ServedModel", "check_spec", "model_facts"]
