"""The OpenAPI document against the server's answers, on the cases a generated client trips
on: each request below is valid by ``/openapi.json`` exactly when the server accepts it, and
every error status a route gives is documented with the error body's schema."""

import pytest

from aiayn.modeldir import load_config
from aiayn.modeldir.tokenizer_files import load_tokenizer
from tests.serve.conftest import _save, wait_ready

jsonschema_rs = pytest.importorskip("jsonschema_rs")  # schemathesis's validator
pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def served(model_dirs, tmp_path_factory):
    """A translator, a generator, a classifier and an encoder, with small limits."""
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec

    encoder = _save(
        tmp_path_factory.mktemp("encoder") / "encoder",
        load_config(model_dirs["classifier"]).replace(n_classes=0),
        load_tokenizer(model_dirs["classifier"]),
        {"data": {"task": "mlm"}},
    )
    specs = [ModelSpec(p, p.name) for p in model_dirs.values()] + [ModelSpec(encoder, "encoder")]
    config = ServeConfig(max_new_tokens=8, max_beam=2, max_texts=4, max_chars=40)
    with TestClient(create_app(specs, config)) as client:
        wait_ready(client)
        yield client, client.get("/openapi.json").json()


def request_schema(document: dict, path: str) -> dict:
    content = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    schema = content["schema"]
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return {**schema, "components": document["components"]}


def valid(document: dict, path: str, body) -> bool:
    return jsonschema_rs.validator_for(request_schema(document, path)).is_valid(body)


CASES = [
    ("/v1/translate", {"text": "Hallo", "early_stop": 0}),  # 0 is no boolean
    ("/v1/translate", {"text": "Hallo", "early_stop": False}),
    ("/v1/translate", {"text": "Hallo", "beam": "2"}),  # a string is no number
    ("/v1/translate", {"text": "Hallo", "beam": 2.0}),  # 2.0 is the integer 2
    ("/v1/translate", {"text": "Hallo", "beam": 1, "nbest": 2}),  # nbest over beam
    ("/v1/translate", {"text": "Hallo", "beam": 2, "nbest": 2}),
    ("/v1/translate", {"text": "Hallo", "beam": 3}),  # over --max-beam 2
    ("/v1/translate", {"text": "Hallo"}),  # max_len_offset's default (50) cut to 8
    ("/v1/translate", {"text": "Hallo", "max_len_offset": 9}),
    ("/v1/translate", {"text": ["a"] * 5}),  # over --max-texts 4
    ("/v1/translate", {"text": []}),
    ("/v1/translate", {"text": "x" * 41}),  # over --max-chars 40
    ("/v1/translate", {"text": "Hallo", "model": "lm"}),  # a model of another family
    ("/v1/classify", {"input": []}),
    ("/v1/classify", {"input": ["gut", " "]}),  # a blank text has no class
    ("/v1/classify", {"input": ["gut"]}),
    ("/v1/embeddings", {"input": "gut"}),  # two encoders: the model must be named
    ("/v1/embeddings", {"input": "gut", "model": None}),
    ("/v1/embeddings", {"input": "gut", "model": "encoder"}),
    ("/v1/embeddings", {"input": "gut", "model": "encoder", "normalize": 1}),
    ("/v1/completions", {"prompt": "the"}),  # max_tokens' default (16) cut to 8
    ("/v1/completions", {"prompt": "the", "seed": "1"}),
    ("/translate", {"q": "", "target": ""}),
    ("/translate", {"q": "Hallo", "target": "en"}),
    ("/translate", {"q": "Hallo", "source": "de", "target": "fr"}),  # not served
    ("/translate", {"q": "Hallo", "source": "de", "target": "en", "format": "html"}),
    (
        "/translate",
        {"q": "<p>Hallo</p>", "source": "de", "target": "en", "format": "html", "prefix": "The"},
    ),
    (
        "/translate",
        {"q": "<p>Hallo</p>", "source": "de", "target": "en", "format": "html", "alternatives": 1},
    ),
]


@pytest.mark.parametrize("path, body", CASES)
def test_valid_by_the_document_exactly_when_accepted(served, path, body):
    client, document = served
    r = client.post(path, json=body)
    refused = 400 if path == "/translate" else 422  # LibreTranslate's status for it
    assert r.status_code in (200, refused), r.text
    assert valid(document, path, body) == (r.status_code == 200), r.text


def test_every_error_a_route_gives_is_documented_with_its_body(served):
    client, document = served
    answers = [
        (client.post("/v1/translate", content=b"{", headers={"content-type": "application/json"}),
         "/v1/translate", "post"),
        (client.post("/v1/translate", content=b"x", headers={"content-type": "text/plain"}),
         "/v1/translate", "post"),
        (client.post("/v1/translate", json={"text": "x", "model": "nope"}), "/v1/translate", "post"),
        (client.post("/translate", content=b"{", headers={"content-type": "application/json"}),
         "/translate", "post"),
        (client.get("/v1/models/nope"), "/v1/models/{model_id}", "get"),
        (client.post("/v2/translate", json={"target_lang": "EN-US"}), "/v2/translate", "post"),
    ]  # fmt: skip
    for r, path, method in answers:
        documented = document["paths"][path][method]["responses"]
        assert str(r.status_code) in documented, (path, r.status_code)
        schema = documented[str(r.status_code)]["content"]["application/json"]["schema"]
        schema = {**schema, "components": document["components"]}
        jsonschema_rs.validate(schema, r.json())
    assert {r.status_code for r, _, _ in answers} == {400, 404, 415}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert {"500", "503"} <= set(operation["responses"]), (method, path)
            if method == "post":
                assert {"400", "413", "415"} <= set(operation["responses"]), path
                lt = ("/translate", "/detect", "/suggest", "/translate_file")  # LibreTranslate's
                deepl = path.startswith(("/v2/", "/v3/"))  # DeepL's: 400 too
                invalid = "400" if path in lt or deepl else "422"
                assert invalid in operation["responses"], path
    assert "HTTPValidationError" not in document["components"]["schemas"]  # FastAPI's 422
