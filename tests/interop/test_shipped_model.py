"""The shipped models/ding-de-en, exported as Marian, translates in transformers (and in
CTranslate2, when installed) exactly as ``aiayn translate`` does, greedy and beam 4.

Both peers score a hypothesis by its log-probability alone here (length penalty 0), the
rule under which their beam search and aiayn's mean the same."""

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.infer.translate import translate_best
from aiayn.interop.hf import export_hf
from aiayn.modeldir import load_model_dir
from aiayn.modeldir.tokenizer_files import load_tokenizer

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

ROOT = Path(__file__).parents[2]
MODEL = ROOT / "models" / "ding-de-en"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    if not (MODEL / "model.safetensors").is_file():
        pytest.skip("models/ding-de-en is not here")
    out = tmp_path_factory.mktemp("ding") / "hf"
    export_hf(MODEL, out)
    lines = gzip.decompress((ROOT / "data" / "ding-de-en" / "test.de.gz").read_bytes())
    sources = lines.decode("utf-8").split("\n")[:6]
    model, tokenizer = load_model_dir(MODEL), load_tokenizer(MODEL)
    ours = {b: translate_best(model, tokenizer, sources, beam=b, lenpen=0.0) for b in (1, 4)}
    return out, sources, ours


@pytest.mark.parametrize("beam", [1, 4])
def test_transformers_translates_the_export_as_aiayn_does(shipped, beam):
    out, sources, ours = shipped
    transformers.logging.set_verbosity_error()
    model = transformers.MarianMTModel.from_pretrained(out).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    got = []
    for text in sources:  # one at a time: aiayn's length limit is per sentence
        batch = tokenizer([text], return_tensors="pt")
        limit = batch["input_ids"].size(1) + 50
        output = model.generate(**batch, num_beams=beam, length_penalty=0.0, max_new_tokens=limit)
        got += tokenizer.batch_decode(output, skip_special_tokens=True)
    assert got == ours[beam]
    assert len(set(got)) == len(got)  # real, different translations


def _converter() -> str | None:
    found = shutil.which("ct2-transformers-converter")
    local = Path(sys.executable).with_name("ct2-transformers-converter")
    return found or (str(local) if local.exists() else None)


@pytest.mark.skipif(_converter() is None, reason="CTranslate2 is not installed (aiayn[bench])")
def test_ctranslate2_converts_the_export_and_translates_as_aiayn_does(shipped, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    out, sources, ours = shipped
    subprocess.run(
        [_converter(), "--model", str(out), "--output_dir", str(tmp_path / "ct2")],
        check=True,
        capture_output=True,
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    tokens = [tokenizer.convert_ids_to_tokens(tokenizer(s)["input_ids"]) for s in sources]
    for beam in (1, 4):
        results = translator.translate_batch(tokens, beam_size=beam, length_penalty=0.0)
        got = [
            tokenizer.decode(
                tokenizer.convert_tokens_to_ids(r.hypotheses[0]), skip_special_tokens=True
            )
            for r in results
        ]
        assert got == ours[beam]
