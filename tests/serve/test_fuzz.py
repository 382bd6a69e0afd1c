"""Schemathesis against the server's own ``/openapi.json``: the schema's examples and edge cases,
then valid and invalid requests built from it, sent to uvicorn on 127.0.0.1; no answer may be
a 5xx. Bounded: ``EXAMPLES`` requests per route and kind, tight server limits, a fixed seed."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.conftest import live_server

pytest.importorskip("schemathesis")
pytest.importorskip("fastapi")

EXAMPLES = 25
SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent))


@pytest.mark.slow
@pytest.mark.skipif(SCHEMATHESIS is None, reason="no schemathesis command beside this Python")
def test_no_request_built_from_the_schema_gets_a_5xx(model_dirs, tmp_path):
    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    specs = [ModelSpec(path, path.name) for path in model_dirs.values()]
    limits = ServeConfig(max_new_tokens=8, max_beam=2, max_texts=4, max_chars=200, timeout=30)
    with live_server(create_app(specs, limits, background=False)) as port:
        run = subprocess.run(
            [
                SCHEMATHESIS, "run", f"http://127.0.0.1:{port}/openapi.json",
                "--checks", "not_a_server_error",
                "--phases", "examples,coverage,fuzzing",
                "--max-examples", str(EXAMPLES),
                "--seed", "1",
                "--request-timeout", "60",
                "--generation-database", "none",
                "--no-color",
            ],
            cwd=tmp_path, capture_output=True, text=True, timeout=540,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    counts = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert counts and counts[1] == counts[2] and int(counts[1]) > 300, run.stdout[-3000:]
