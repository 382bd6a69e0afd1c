"""aiayn: the Transformer of Vaswani et al. (2017), tested line by line."""

from aiayn.config import ModelConfig
from aiayn.model import DecoderOnly, EncoderDecoder, EncoderOnly, build_model

__version__ = "0.1.0"
__all__ = ["DecoderOnly", "EncoderDecoder", "EncoderOnly", "ModelConfig", "build_model"]
