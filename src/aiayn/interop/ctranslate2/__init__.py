"""CTranslate2 (Klein et al. 2020) as a decoding engine for aiayn's encoder-decoders, and as an
export format.

A model directory is converted by CTranslate2's own converter once, and the conversion kept
in a cache checked before each use; the engine decodes with it and answers as
``aiayn.infer.translate.search`` does. Three rooms, importing one way (engine -> cache ->
conversion):

* ``conversion``: the conversion through transformers' Marian (``convert``,
  ``sentencepiece_files``);
* ``writer``: an imported CTranslate2 model or Argos Translate package, fine-tuned or not,
  written back as a TransformerSpec in the layout it came in (``write_spec``);
* ``exports``: ``export --format ctranslate2`` (``export_ctranslate2``) and the model of an
  Argos Translate package, by one or the other;
* ``cache``: where conversions are kept (beside the model, ``cache_dir``, ``$AIAYN_CACHE_DIR``
  or the user's cache), what names one (``conversion_inputs``, ``cache_key``), its stamp, and
  checking and repairing it under a lock (``cached_model``, ``damage``);
* ``engine``: ``CTranslate2Engine``, whose ``search`` runs CTranslate2's greedy, beam and
  sampling searches (``searches``, its base class) with aiayn's options and scores.
"""

from aiayn.interop.ctranslate2.cache import (
    CACHE_DIR,
    CACHE_ENV,
    cache_key,
    cached_model,
    conversion_inputs,
    damage,
    file_digests,
)
from aiayn.interop.ctranslate2.conversion import (
    STAMP,
    CannotRunHere,
    convert,
    sentencepiece_files,
)
from aiayn.interop.ctranslate2.engine import CTranslate2Engine
from aiayn.interop.ctranslate2.exports import export_ctranslate2

__all__ = [
    "CACHE_DIR",
    "CACHE_ENV",
    "STAMP",
    "CTranslate2Engine",
    "CannotRunHere",
    "cache_key",
    "cached_model",
    "conversion_inputs",
    "convert",
    "damage",
    "export_ctranslate2",
    "file_digests",
    "sentencepiece_files",
]
