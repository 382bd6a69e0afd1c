"""LibreTranslate's own Python client (libretranslatepy, its bindings on PyPI) against
``aiayn serve`` over HTTP, as its users call it: form bodies, a GET with a body for
/languages, the API key in the form, refusals raised as urllib's HTTPError."""

import json
import urllib.error

import pytest

from tests.serve.conftest import live_server

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
LibreTranslateAPI = pytest.importorskip("libretranslatepy").LibreTranslateAPI


@pytest.fixture(scope="module")
def served(model_dirs, tmp_path_factory):
    """The translator behind --api-keys on 127.0.0.1: (its URL, a valid key, the model)."""
    from aiayn.serve.access import AccessConfig
    from aiayn.serve.app import create_app
    from aiayn.serve.keys import KeyStore
    from aiayn.serve.models import ModelSpec

    db = tmp_path_factory.mktemp("keys") / "keys.db"
    store = KeyStore(db)
    key = store.add()[0]
    store.close()
    access = AccessConfig(api_keys=True, api_keys_db=str(db))
    specs = [ModelSpec(model_dirs["translator"], "de-en")]
    app = create_app(specs, access=access, background=False)
    with live_server(app) as port:
        yield f"http://127.0.0.1:{port}", key, app.state.registry.models["de-en"]


def test_its_calls_answer_as_the_model_translates(served):
    url, key, model = served
    lt = LibreTranslateAPI(url, api_key=key)
    for text in ("Das ist gut.", "Wo ist der Bahnhof?"):
        want = model.api.translate([text], scores=False)[0].text
        assert lt.translate(text, "de", "en") == want
    codes = {language["code"]: language["targets"] for language in lt.languages()}
    assert codes == {"de": ["de", "en"], "en": ["en"]}
    from aiayn.serve.detect import detect

    (found,) = detect(["Hallo Welt"], ["de", "en"])
    assert lt.detect("Hallo Welt") == [{"language": "de", "confidence": found[1]}]


@pytest.mark.parametrize("key, status", [(None, 400), ("not-a-key", 403)])
def test_a_missing_or_wrong_key_is_its_http_error_with_libretranslates_words(served, key, status):
    url, _, _ = served
    with pytest.raises(urllib.error.HTTPError) as refused:
        LibreTranslateAPI(url, api_key=key).translate("Das ist gut.", "de", "en")
    assert refused.value.code == status
    words = "Invalid API key" if key else "Please contact the server operator to get an API key"
    assert json.loads(refused.value.read())["error"] == words
