"""``aiayn serve --device / --dtype``: the served models run where and in the dtype asked,
/v1/models says so, and a device or dtype this machine cannot run is refused before any
model loads."""

import pytest
import torch

import aiayn
from aiayn.errors import OptionError
from tests.serve.conftest import wait_ready

SENTENCES = ["Guten Morgen.", "Das Haus ist groß."]


@pytest.fixture
def no_cuda(monkeypatch):
    """A machine without a CUDA GPU, whatever this one has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_models_say_their_device_and_dtype_and_answer_in_it(model_dirs, no_cuda):
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.server import model_specs

    paths = [str(model_dirs[k]) for k in ("translator", "classifier")]
    specs = model_specs(paths, device="auto", dtype="bfloat16")
    with TestClient(create_app(specs, ServeConfig())) as c:
        wait_ready(c)
        models = c.get("/v1/models").json()["data"]
        assert [(m["device"], m["dtype"]) for m in models] == [("cpu", "bfloat16")] * 2
        got = c.post("/v1/translate", json={"model": "de-en", "text": SENTENCES}).json()
        want = aiayn.load(model_dirs["translator"], dtype="bfloat16").translate(SENTENCES)
        assert [t["text"] for t in got["translations"]] == [t.text for t in want]
        r = c.post("/v1/classify", json={"model": "sentiment", "input": SENTENCES})
        assert r.status_code == 200, r.text


def test_the_default_is_float32_on_the_cpu(client):
    models = client.get("/v1/models").json()["data"]
    assert {(m["device"], m["dtype"]) for m in models} == {("cpu", "float32")}


def test_an_impossible_device_or_dtype_is_refused_before_loading(model_dirs, no_cuda, monkeypatch):
    from aiayn.serve import models
    from aiayn.serve.server import model_specs

    def fail(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(models.aiayn, "load", fail)
    paths = [str(p) for p in model_dirs.values()]
    with pytest.raises(OptionError, match="device cuda: CUDA is not available"):
        model_specs(paths, device="cuda")
    with pytest.raises(OptionError, match="dtype float16 runs on CUDA only"):
        model_specs(paths, dtype="float16")
    with pytest.raises(OptionError, match="choose auto, cpu, cuda or cuda:N"):
        model_specs([paths[0]] * 2, ensemble=True, device="gpu")
    with pytest.raises(OptionError, match="int8 layers .* compute in float32"):
        model_specs(paths, quantize="int8", dtype="bfloat16")
