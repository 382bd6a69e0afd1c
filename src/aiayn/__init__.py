"""aiayn: the Transformer of Vaswani et al. (2017), tested line by line.

``aiayn.load(path)`` opens a model directory as a ``Translator``, ``Generator``,
``Classifier`` or ``Encoder`` (see ``aiayn.api``).
"""

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)

from aiayn.api import (
    PLACEHOLDERS,
    Classification,
    Classifier,
    Encoder,
    Generation,
    Generator,
    Glossary,
    Hypothesis,
    Sampling,
    Translation,
    Translator,
    load,
)
from aiayn.config import ModelConfig
from aiayn.model import DecoderOnly, EncoderDecoder, EncoderOnly, build_model

__all__ = [
    "PLACEHOLDERS",
    "Classification",
    "Classifier",
    "DecoderOnly",
    "Encoder",
    "EncoderDecoder",
    "EncoderOnly",
    "Generation",
    "Generator",
    "Glossary",
    "Hypothesis",
    "ModelConfig",
    "Sampling",
    "Translation",
    "Translator",
    "build_model",
    "load",
]
