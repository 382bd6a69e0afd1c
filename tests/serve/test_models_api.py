"""What clients ask of the server besides inference: one model (OpenAI's models.retrieve), with
its ``created`` time, and the API docs page, whose files are served locally."""

import re

import pytest

from aiayn.modeldir import WEIGHTS_FILE
from tests.serve.conftest import live_server, make_client, wait_ready

pytest.importorskip("fastapi")


def test_retrieve_one_model_as_the_list_shows_it(client, model_dirs):
    listed = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
    for name, path in (("de-en", model_dirs["translator"]), ("lm", model_dirs["lm"])):
        r = client.get(f"/v1/models/{name}")
        assert r.status_code == 200, r.text
        assert r.json() == listed[name]
        created = r.json()["created"]
        assert isinstance(created, int) and created == int((path / WEIGHTS_FILE).stat().st_mtime)


def test_an_unknown_model_is_404_in_openais_shape(client):
    r = client.get("/v1/models/nope")
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "model"
    assert "'nope' not found" in error["message"] and "de-en" in error["message"]


def test_a_model_name_with_a_slash_is_retrieved(model_dirs):
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    app = create_app([ModelSpec(model_dirs["lm"], "org/lm")])
    with TestClient(app) as c:
        wait_ready(c)
        assert c.get("/v1/models/org/lm").json()["id"] == "org/lm"


def test_the_openai_client_lists_retrieves_and_uses_the_models(model_dirs):
    openai = pytest.importorskip("openai")
    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    specs = [ModelSpec(model_dirs["lm"], "lm"), ModelSpec(model_dirs["classifier"], "sentiment")]
    with live_server(create_app(specs, background=False)) as port:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0)
        assert [m.id for m in client.models.list()] == ["lm", "sentiment"]
        model = client.models.retrieve("lm")
        assert model.id == "lm" and model.owned_by == "aiayn"
        assert model.created == int((model_dirs["lm"] / WEIGHTS_FILE).stat().st_mtime)
        with pytest.raises(openai.NotFoundError, match="'gpt-4' not found"):
            client.models.retrieve("gpt-4")
        completion = client.completions.create(
            model="lm", prompt="the", max_tokens=4, temperature=0
        )
        assert completion.usage.completion_tokens <= 4 and completion.choices[0].finish_reason
        vectors = client.embeddings.create(model="sentiment", input=["gut", "schlecht"])
        assert len(vectors.data) == 2 and len(vectors.data[0].embedding) > 0


def test_docs_load_swagger_ui_from_this_server(client):
    pytest.importorskip("swagger_ui_bundle")
    page = client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
    assert "/openapi.json" in urls and "/docs/swagger-ui-bundle.js" in urls, urls
    assert not [u for u in urls if "//" in u], urls  # nothing from another host
    for url in urls:
        r = client.get(url)
        assert r.status_code == 200, url
    script = client.get("/docs/swagger-ui-bundle.js")
    assert "javascript" in script.headers["content-type"] and len(script.content) > 100_000
    assert client.get("/docs/index.html").status_code == 404  # only the files the page loads
    assert client.get("/redoc").status_code == 404  # ReDoc would come from a CDN


def test_without_swagger_ui_the_docs_page_says_how_to_get_it(model_dirs, monkeypatch):
    from aiayn.serve import docs

    monkeypatch.setattr(docs, "swagger_ui_dir", lambda: None)
    with make_client({"lm": model_dirs["lm"]}) as c:
        page = c.get("/docs")
        assert page.status_code == 200 and "pip install 'aiayn[serve]'" in page.text
        assert 'href="/openapi.json"' in page.text
        assert c.get("/docs/swagger-ui-bundle.js").status_code == 404
