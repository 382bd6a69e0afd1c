"""Schemathesis against the server's own ``/openapi.json``, serving a translator (with each
engine), a generator, a classifier and an encoder: the schema's examples and edge cases, then
valid and invalid requests built from it, sent to uvicorn on 127.0.0.1. Every check: no 5xx,
every status and content type documented, answers as their schemas say, requests valid by the
document accepted and invalid ones refused. Bounded: ``EXAMPLES`` requests per route and kind,
tight server limits (``max_chars`` so small that any text fits every model), a fixed seed:
about 8 seconds per engine."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.conftest import _save, live_server

pytest.importorskip("schemathesis")
pytest.importorskip("fastapi")

EXAMPLES = 25
SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(SCHEMATHESIS is None, reason="no schemathesis command beside this Python")
@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_the_server_answers_as_its_openapi_document_says(model_dirs, tmp_path, engine):
    from aiayn.modeldir import load_config
    from aiayn.modeldir.tokenizer_files import load_tokenizer
    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    if engine == "ctranslate2":
        pytest.importorskip("ctranslate2")
    encoder = _save(  # an encoder-only model without a classifier head
        tmp_path / "encoder",
        load_config(model_dirs["classifier"]).replace(n_classes=0),
        load_tokenizer(model_dirs["classifier"]),
        {"data": {"task": "mlm"}},
    )
    specs = [
        ModelSpec(path, path.name, engine=engine if name == "translator" else "torch")
        for name, path in model_dirs.items()
    ] + [ModelSpec(encoder, "encoder")]
    limits = ServeConfig(max_new_tokens=8, max_beam=2, max_texts=4, max_chars=15, timeout=30)
    # /translate_file: a file's name must end in a supported format (.txt, .docx, ...), which
    # no schema can say of a multipart file; one that does not is answered 400, as
    # LibreTranslate answers it. /translate: under source "auto" (the default) a text's
    # language is found in it, and one no model translates into the target ("Hello" into
    # German, here) is answered 400, as LibreTranslate answers it: no schema can say which
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        "".join(
            f'[[operations]]\ninclude-path = "{path}"\n'
            "checks.positive_data_acceptance.expected-statuses = [200, 400]\n"
            for path in ("/translate_file", "/translate")
        )
    )
    with live_server(create_app(specs, limits, background=False)) as port:
        run = subprocess.run(
            [
                SCHEMATHESIS, "--config-file", str(config),
                "run", f"http://127.0.0.1:{port}/openapi.json",
                "--checks", "all",
                "--phases", "examples,coverage,fuzzing",
                "--max-examples", str(EXAMPLES),
                "--seed", "1",
                "--request-timeout", "60",
                "--generation-database", "none",
                "--exclude-path-regex", DEEPL,  # test_deepl_routes_answer_as_... below
                "--no-color",
            ],
            cwd=tmp_path, capture_output=True, text=True, timeout=540,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    counts = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert counts and counts[1] == counts[2] and int(counts[1]) > 300, run.stdout[-3000:]


DEEPL = "^/v[23]/"  # DeepL's routes
# What no schema of DeepL's routes can say: an upload's name ends in a supported format; a
# glossary's entries are TSV or CSV of terms; a text under tag_handling is well-formed XML (or
# HTML the parser need not repair); a text over --max-chars is DeepL's 413, not a 422.
DEEPL_CONFIG = """
[[operations]]
include-name = "POST /v2/document"
checks.positive_data_acceptance.expected-statuses = [200, 400]

[[operations]]
include-name = "POST /v2/glossaries"
checks.positive_data_acceptance.expected-statuses = [201, 400]

[[operations]]
include-name = "POST /v3/glossaries"
checks.positive_data_acceptance.expected-statuses = [201, 400]

[[operations]]
include-name = "POST /v2/translate"
checks.positive_data_acceptance.expected-statuses = [200, 400, 404]
checks.negative_data_rejection.expected-statuses = [400, 404, 413, 415]
"""


@pytest.mark.skipif(SCHEMATHESIS is None, reason="no schemathesis command beside this Python")
def test_deepl_routes_answer_as_the_openapi_document_says(model_dirs, tmp_path):
    """DeepL's routes, serving the translator: no 5xx, every status and content type
    documented, answers as their schemas say, requests valid by the document accepted
    (but for what ``DEEPL_CONFIG`` names) and invalid ones refused."""
    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    pytest.importorskip("defusedxml")
    specs = [ModelSpec(model_dirs["translator"], "de-en", engine="torch")]
    limits = ServeConfig(max_new_tokens=8, max_texts=4, max_chars=15, timeout=30)
    config = tmp_path / "schemathesis.toml"
    config.write_text(DEEPL_CONFIG)
    with live_server(create_app(specs, limits, background=False)) as port:
        run = subprocess.run(
            [
                SCHEMATHESIS, "--config-file", str(config),
                "run", f"http://127.0.0.1:{port}/openapi.json",
                "--checks", "all",
                "--phases", "examples,coverage,fuzzing",
                "--max-examples", str(EXAMPLES),
                "--seed", "1",
                "--include-path-regex", DEEPL,
                "--request-timeout", "60",
                "--generation-database", "none",
                "--no-color",
            ],
            cwd=tmp_path, capture_output=True, text=True, timeout=540,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    counts = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert counts and counts[1] == counts[2] and int(counts[1]) > 300, run.stdout[-3000:]
