"""Model code: torch and config only, no I/O and no training."""

from aiayn.model.transformer import (
    DecoderOnly,
    DecoderState,
    EncoderDecoder,
    EncoderOnly,
    build_model,
)

__all__ = ["DecoderOnly", "DecoderState", "EncoderDecoder", "EncoderOnly", "build_model"]
