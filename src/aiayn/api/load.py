"""``aiayn.load``: one object per model family, chosen by the model directory's config."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from aiayn.api.encoder import Classifier, Encoder
from aiayn.api.engine import check_engine_name, resolve_engine
from aiayn.api.generator import Generator
from aiayn.api.translator import Translator
from aiayn.config import ModelConfig
from aiayn.errors import OptionError, UserError
from aiayn.infer.classify import check_classifier
from aiayn.modeldir import ModelDir

# what each kind of model directory is good for, by command
FITS = {
    "encoder-decoder": "translate, evaluate or attention",
    "decoder-only": "generate",
    "encoder-only classifier": "classify or embed",
    "encoder-only": "embed, or train with train.init_from = it (a pretrained encoder)",
}
COMMAND_FAMILIES = {
    "translate": "encoder-decoder",
    "evaluate": "encoder-decoder",
    "attention": "encoder-decoder",
    "generate": "decoder-only",
    "embed": "encoder-only",
    "classify": "encoder-only classifier",
}


def kind(config: ModelConfig) -> str:
    """The family, with "classifier" added for an encoder-only model with a head."""
    if config.family == "encoder-only" and config.n_classes:
        return "encoder-only classifier"
    return config.family


def api_class(config: ModelConfig) -> type:
    return {
        "encoder-decoder": Translator,
        "decoder-only": Generator,
        "encoder-only classifier": Classifier,
        "encoder-only": Encoder,
    }[kind(config)]


def load(
    path: str | Path | ModelDir | Sequence[str | Path | ModelDir],
    *,
    quantize: str | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    engine: str = "auto",
    cache_dir: str | Path | None = None,
    decoders: int = 1,
) -> Translator | Generator | Classifier | Encoder:
    """The model in directory ``path`` as the object of its family: a ``Translator``
    (encoder-decoder), ``Generator`` (decoder-only), ``Classifier`` (encoder-only with a
    classifier head) or ``Encoder`` (encoder-only)::

        tr = aiayn.load("models/ding-de-en")
        tr.translate(["Guten Morgen."], beam=4)[0].text

    ``path`` may also be a directory already opened (``aiayn.modeldir.ModelDir``), which is
    then not read again.
    ``quantize`` ("int8") quantizes a float model's linear layers as it loads (CPU);
    ``device`` is where the model runs: "cpu", "cuda", "cuda:N" or "auto" (CUDA when
    ``torch.cuda.is_available()``, else the CPU; the CPU for int8 layers); ``dtype``
    ("float32", "bfloat16", or "float16" on CUDA only) is what the floating weights are cast
    to after loading (``aiayn.api.device``; a device or dtype this machine cannot run is a
    ``UserError`` before anything loads). A list of translator directories loads an ensemble
    (``Translator.ensemble``: their per-step probabilities averaged; torch engine). ``engine``
    "auto" (the default) translates greedy and beam search with CTranslate2 where it is
    installed and runs the model as asked, everything else with the torch model
    (``aiayn.api.engine``);
    "torch" always with the torch model; "ctranslate2" (translators only; ``pip
    install 'aiayn[ctranslate2]'``) translates with CTranslate2, converted once and cached in
    ``cache_dir`` (default: ``$AIAYN_CACHE_DIR``, else ``path/.ctranslate2``, else, where
    ``path`` cannot be written, ``$XDG_CACHE_HOME/aiayn/ctranslate2``; ``quantize`` "int8":
    CTranslate2's int8); the torch model stays loaded for ``score`` and ``attention``;
    ``engine`` "auto" is "ctranslate2" where it is installed and the model translates, else
    "torch", and decodes what CTranslate2 cannot (constraints) with the torch model.
    ``decoders``: how many threads may translate at once with CTranslate2, each on a
    decoder of its own of ``torch.get_num_threads()`` threads (set that to the cores over
    ``decoders``, as ``aiayn serve`` does); the torch model is shared by any number. Bad
    directories are ``UserError``s naming the file.

    ``path`` may also be another toolkit's translation model, served as it is
    (``load_foreign``): an Argos Translate package (``.argosmodel``, or a package folder as
    Argos Translate installs it) or a CTranslate2 model directory.
    """
    if not isinstance(decoders, int) or isinstance(decoders, bool) or decoders < 1:
        raise OptionError(f"decoders must be an integer >= 1, got {decoders!r}", "decoders")
    if isinstance(path, str | Path) and foreign(path):
        return load_foreign(
            path, quantize=quantize, device=device, dtype=dtype, engine=engine,
            cache_dir=cache_dir, decoders=decoders,
        )  # fmt: skip
    if not isinstance(path, str | Path | ModelDir):  # several translators: an ensemble
        members = [ModelDir.open(p) for p in path]
        for member in members:
            check_engine(engine, member.config, member.path)
            if kind(member.config) != "encoder-decoder":
                raise UserError(
                    f"{member.path}: an ensemble is of translators (encoder-decoder models)"
                )
        if engine == "ctranslate2":
            raise UserError("an ensemble decodes with the torch engine (engine 'torch')")
        return Translator.ensemble(members, quantize=quantize, device=device, dtype=dtype)
    directory = ModelDir.open(path)
    check_engine(engine, directory.config, directory.path)
    int8 = quantize or directory.quantization
    used = resolve_engine(engine, directory.config, device=device, dtype=dtype, quantize=int8)
    if used != "torch":
        return Translator.from_dir(
            directory,
            quantize=quantize,
            device=device,
            dtype=dtype,
            engine=engine,
            cache_dir=cache_dir,
            decoders=decoders,
        )
    return api_class(directory.config).from_dir(
        directory, quantize=quantize, device=device, dtype=dtype
    )


def foreign(path: str | Path) -> bool:
    """Whether ``path`` holds another toolkit's model (``aiayn.interop.foreign``): an Argos
    Translate package or a CTranslate2 model directory."""
    from aiayn.interop.foreign import foreign_kind

    return foreign_kind(path) is not None


def load_foreign(
    path: str | Path,
    *,
    quantize: str | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    engine: str = "auto",
    cache_dir: str | Path | None = None,
    decoders: int = 1,
    languages: tuple[str, str] | None = None,
) -> Translator:
    """The Argos Translate package or CTranslate2 model at ``path`` as a translator: under
    engine "auto" (where CTranslate2 is installed) or "ctranslate2" a ``PackageTranslator``
    (CTranslate2 on the model as it is, with Argos Translate's settings; aiayn's import of it,
    kept in ``cache_dir``, for what only aiayn's model does: ``aiayn.api.package``); under
    "torch" (or "auto" without CTranslate2) aiayn's import alone, an ordinary ``Translator``
    (which ``quantize`` then applies to). ``languages``: a CTranslate2 model's pair."""
    import importlib.util

    from aiayn.api.package import PackageTranslator
    from aiayn.interop.foreign import open_foreign

    check_engine_name(engine)
    if engine == "auto":  # CTranslate2 alone (nothing is converted: no converter needed)
        installed = importlib.util.find_spec("ctranslate2") is not None
        engine = "ctranslate2" if installed else "torch"
    if engine == "torch":
        imported = open_foreign(path, cache_dir, languages).imported(cache_dir)
        return Translator.from_dir(imported, quantize=quantize, device=device, dtype=dtype)
    if quantize is not None:
        raise OptionError(
            f"quantize: {path} is decoded by CTranslate2 in the type its weights were saved "
            "in (int8 where they are); quantize applies to aiayn's import of it (engine torch)",
            "quantize",
            "engine",
        )
    return PackageTranslator.open(
        path, device=device, dtype=dtype, cache_dir=cache_dir, decoders=decoders,
        languages=languages,
    )  # fmt: skip


def check_engine(engine: str, config: ModelConfig, path: str | Path) -> None:
    """``engine`` is one of ``ENGINES``, and one the model's family decodes with."""
    check_engine_name(engine)
    if engine == "ctranslate2" and config.family != "encoder-decoder":
        raise UserError(
            f"{path} holds a model of the {kind(config)} family; the {engine} engine translates "
            "with encoder-decoder models only (use engine 'torch')"
        )


def load_for(
    command: str,
    path: str | Path,
    *,
    quantize: str | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
    engine: str = "auto",
    cache_dir: str | Path | None = None,
):
    """``load`` for a command (translate, evaluate, attention, generate, embed, classify):
    a directory of another family is a ``UserError`` naming the commands it fits."""
    want = COMMAND_FAMILIES[command]
    if foreign(path):
        if want != "encoder-decoder":
            raise UserError(
                f"{path} holds a translation model of another toolkit (an Argos Translate "
                f"package or a CTranslate2 model); {command} needs a{'n' if want[0] in 'aeiou' else ''} "
                f"{want} model (it fits: aiayn {FITS['encoder-decoder']})"
            )
        return load_foreign(
            path, quantize=quantize, device=device, dtype=dtype, engine=engine, cache_dir=cache_dir
        )
    directory = ModelDir(path)
    config = directory.config
    have = kind(config)
    if command == "classify":
        check_classifier(config, path)
    elif config.family != want:
        article = "an" if want[0] in "aeiou" else "a"
        raise UserError(
            f"{path} holds a model of the {have} family; {command} needs {article} {want} "
            f"model (this directory fits: aiayn {FITS[have]})"
        )
    check_engine(engine, config, path)
    if command == "embed":  # any encoder-only model embeds, a classifier's encoder too
        return Encoder.from_dir(directory, quantize=quantize, device=device, dtype=dtype)
    return load(
        directory, quantize=quantize, device=device, dtype=dtype, engine=engine, cache_dir=cache_dir
    )
