"""``export --format ctranslate2`` and the model inside an Argos Translate package: a
CTranslate2 model written the way the model directory calls for.

aiayn's own models (and imported Marian ones) are converted through transformers' Marian by
CTranslate2's own converter (``conversion.convert``), beside their sentencepiece model(s); a
model imported from a CTranslate2 model or an Argos Translate package, fine-tuned or not, is
written back as a TransformerSpec in the layout it came in, beside its own tokenizer files
(``writer``).
"""

from __future__ import annotations

from pathlib import Path

from aiayn.fileio import replace_directory
from aiayn.interop.ctranslate2 import writer
from aiayn.interop.ctranslate2.conversion import convert, sentencepiece_files
from aiayn.modeldir import ModelDir


def tokenizer_files(tokenizer) -> dict[str, bytes]:
    """The files that cut text into the written model's pieces, by name."""
    if writer.has_spec_tokenizer(tokenizer):
        return writer.tokenizer_files(tokenizer)
    return sentencepiece_files(tokenizer)


def write_model(directory: ModelDir, out: Path, quantization: str | None) -> dict:
    """Write the CTranslate2 model of ``directory`` into ``out``; the record of
    ``out/aiayn.json``."""
    if writer.has_spec_tokenizer(directory.tokenizer()):
        return writer.write_spec(directory, out, quantization)
    return convert(directory, out, quantization, add_source_eos=True)


def export_ctranslate2(
    model_dir: ModelDir | Path, out: Path, quantization: str | None = None, force: bool = False
) -> dict:
    """Write ``model_dir`` as a CTranslate2 model directory ``out`` (replaced whole, with
    ``force``: ``aiayn.fileio.replace_directory``): the model, which frames each source
    itself (aiayn's models: eos appended, ``add_source_eos``), and the tokenizer file(s)
    that cut text into its tokens::

        sp = sentencepiece.SentencePieceProcessor(model_file=f"{out}/sentencepiece.model")
        translator = ctranslate2.Translator(out)
        result = translator.translate_batch([sp.encode(text, out_type=str)])
        sp.decode(result[0].hypotheses[0])
    """
    directory, out = ModelDir.open(model_dir), Path(out)
    files = tokenizer_files(directory.tokenizer())
    with replace_directory(out, force, keep=[directory.path]) as new:
        record = write_model(directory, new, quantization)
        for name, data in files.items():
            (new / name).write_bytes(data)
    return {"format": "ctranslate2", "out": str(out), **record, "tokenizer": sorted(files)}
