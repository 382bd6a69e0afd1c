"""OpenAI's API as its own Python client uses it (``openai``, against uvicorn on 127.0.0.1):
every field of ``completions.create`` and ``embeddings.create`` is honoured, or refused with a
422 naming it where honouring it is beyond this server; none is silently ignored."""

import time

import httpx
import pytest
import torch

import aiayn
from tests.serve.conftest import live_server
from tests.tolerance import assert_close_to_scale

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

GREEDY = {"model": "lm", "temperature": 0, "max_tokens": 12}


@pytest.fixture(scope="module")
def served(model_dirs):
    """(openai client, base URL) of a server with a language model and an encoder."""
    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    specs = [ModelSpec(model_dirs["lm"], "lm"), ModelSpec(model_dirs["classifier"], "sentiment")]
    with live_server(create_app(specs, background=False)) as port:
        base = f"http://127.0.0.1:{port}/v1"
        yield openai.OpenAI(base_url=base, api_key="-", max_retries=0), base


@pytest.fixture(scope="module")
def lm(model_dirs):
    return aiayn.load(model_dirs["lm"])


def test_the_clients_default_base64_embeddings_equal_the_float_ones(served, model_dirs):
    client, _ = served
    texts = ["Ein Satz.", "Noch ein etwas längerer Satz."]
    b64 = client.embeddings.create(model="sentiment", input=texts)  # the client asks base64
    floats = client.embeddings.create(model="sentiment", input=texts, encoding_format="float")
    want = aiayn.load(model_dirs["classifier"]).embed(texts)
    assert_close_to_scale(torch.tensor([d.embedding for d in b64.data]), want)
    assert [d.embedding for d in b64.data] == [d.embedding for d in floats.data]
    assert [d.index for d in b64.data] == [0, 1] and b64.model == "sentiment"


def test_embeddings_of_token_ids_equal_those_of_their_text(served, model_dirs):
    client, _ = served
    encoder = aiayn.load(model_dirs["classifier"])
    texts = ["Ein Satz.", "Noch einer."]
    ids = encoder.tokenizer.encode(texts)
    want = encoder.embed(texts)
    one = client.embeddings.create(model="sentiment", input=ids[0], encoding_format="float")
    assert_close_to_scale(torch.tensor(one.data[0].embedding), want[0])
    both = client.embeddings.create(model="sentiment", input=ids)
    assert_close_to_scale(torch.tensor([d.embedding for d in both.data]), want)
    assert both.usage.prompt_tokens == sum(len(x) + 1 for x in ids)  # each with its eos
    vocab = encoder.config.vocab_size
    with pytest.raises(openai.UnprocessableEntityError, match=f"token id {vocab} is not"):
        client.embeddings.create(model="sentiment", input=[[1, 2], [3, vocab]])


def test_dimensions_is_the_models_or_refused(served, model_dirs):
    client, _ = served
    d_model = aiayn.load(model_dirs["classifier"]).config.d_model
    same = client.embeddings.create(model="sentiment", input="gut", dimensions=d_model)
    assert len(same.data[0].embedding) == d_model
    with pytest.raises(openai.UnprocessableEntityError, match="dimensions: model sentiment") as e:
        client.embeddings.create(model="sentiment", input="gut", dimensions=d_model // 2)
    assert e.value.body["param"] == "dimensions"


def test_a_list_of_prompts_gives_a_choice_each_with_the_usage_of_all(served, lm):
    client, _ = served
    prompts = ["the", "a quick"]
    out = client.completions.create(prompt=prompts, **GREEDY)
    assert [c.index for c in out.choices] == [0, 1]
    for prompt, choice in zip(prompts, out.choices, strict=True):
        alone = client.completions.create(prompt=prompt, **GREEDY).choices[0]
        assert (choice.text, choice.finish_reason) == (alone.text, alone.finish_reason)
    ours = lm.generate(prompts, max_new_tokens=12, sampling=aiayn.Sampling(temperature=0))
    assert [c.text for c in out.choices] == [g.text for g in ours]
    assert out.usage.prompt_tokens == sum(g.prompt_tokens for g in ours)
    assert out.usage.completion_tokens == sum(len(g.tokens) for g in ours)
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens


def test_token_id_prompts_continue_as_their_text_does(served, lm):
    client, _ = served
    ids = [lm.prompt_ids("the"), lm.prompt_ids("a quick")]
    text = client.completions.create(prompt=["the", "a quick"], **GREEDY)
    one = client.completions.create(prompt=ids[0], **GREEDY)
    both = client.completions.create(prompt=ids, **GREEDY)
    assert one.choices[0].text == text.choices[0].text
    assert [c.text for c in both.choices] == [c.text for c in text.choices]
    assert both.usage == text.usage
    vocab = lm.config.vocab_size
    with pytest.raises(openai.UnprocessableEntityError, match=r"prompt\[1\]: token id") as e:
        client.completions.create(prompt=[[1], [vocab]], **GREEDY)
    assert e.value.body["param"] == "prompt[1]"


def test_n_samples_choice_j_with_seed_plus_j(served):
    from aiayn.serve.config import ServeConfig

    client, _ = served
    body = {"model": "lm", "prompt": ["the", "a"], "max_tokens": 8, "temperature": 1.0}
    out = client.completions.create(n=2, seed=5, **body)
    assert [c.index for c in out.choices] == [0, 1, 2, 3]
    for k, choice in enumerate(out.choices):
        prompt, j = body["prompt"][k // 2], k % 2
        alone = client.completions.create(**{**body, "prompt": prompt}, seed=5 + j)
        assert choice.text == alone.choices[0].text
    too_many = ServeConfig().max_texts // 2 + 1  # choices of the two prompts
    with pytest.raises(openai.UnprocessableEntityError, match="--max-texts") as e:
        client.completions.create(n=too_many, **body)
    assert e.value.body["param"] == "n"


def test_stop_ends_the_text_before_it_streamed_or_not(served):
    client, _ = served
    body = {**GREEDY, "prompt": "the", "max_tokens": 30}
    whole = client.completions.create(**body).choices[0].text
    stop = whole[4:6]
    want = whole[: whole.find(stop)]
    for value in (stop, [stop, "§§"]):
        out = client.completions.create(stop=value, **body).choices[0]
        assert (out.text, out.finish_reason) == (want, "stop")
        chunks = list(client.completions.create(stop=value, stream=True, **body))
        assert "".join(c.choices[0].text for c in chunks) == want
        assert chunks[-1].choices[0].finish_reason == "stop"
    never = client.completions.create(stop="§§", **body).choices[0]
    assert (never.text, never.finish_reason) == (whole, "length")


def test_echo_puts_the_prompt_before_the_text(served, lm):
    client, _ = served
    plain = client.completions.create(prompt="the", **GREEDY).choices[0].text
    assert client.completions.create(prompt="the", echo=True, **GREEDY).choices[0].text == (
        "the" + plain
    )
    ids = client.completions.create(prompt=lm.prompt_ids("the"), echo=True, **GREEDY)
    assert ids.choices[0].text == "the" + plain
    chunks = list(client.completions.create(prompt="the", echo=True, stream=True, **GREEDY))
    assert chunks[0].choices[0].text == "the"
    assert "".join(c.choices[0].text for c in chunks) == "the" + plain


def test_a_stream_with_include_usage_ends_with_the_usage(served):
    client, _ = served
    body = {**GREEDY, "prompt": ["the", "a"]}
    whole = client.completions.create(**body)
    chunks = list(
        client.completions.create(stream=True, stream_options={"include_usage": True}, **body)
    )
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    assert all(c.usage is None for c in chunks[:-1])
    for k, choice in enumerate(whole.choices):
        mine = [c.choices[0] for c in chunks[:-1] if c.choices[0].index == k]
        assert "".join(c.text for c in mine) == choice.text
        assert mine[-1].finish_reason == choice.finish_reason
    plain = list(client.completions.create(stream=True, **body))
    assert all(c.usage is None and c.choices for c in plain)


@pytest.mark.parametrize(
    "field, value",
    [
        ("logprobs", 2),
        ("suffix", "end"),
        ("best_of", 3),
        ("presence_penalty", 0.5),
        ("frequency_penalty", -1.0),
        ("logit_bias", {"5": 100}),
    ],
)
def test_a_field_this_server_cannot_honour_is_refused_by_name(served, field, value):
    client, _ = served
    with pytest.raises(openai.UnprocessableEntityError, match="not supported") as e:
        client.completions.create(prompt="the", **GREEDY, **{field: value})
    assert e.value.body["param"] == field and e.value.body["type"] == "invalid_request_error"


def test_the_values_that_change_nothing_and_nulls_are_accepted(served):
    client, base = served
    want = client.completions.create(prompt="the", **GREEDY).choices[0].text
    neutral = {  # what LangChain's OpenAI wrapper sends by default
        "logprobs": None,
        "suffix": None,
        "best_of": 1,
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "logit_bias": {},
        "user": "someone",
        "stop": None,
    }
    out = client.completions.create(prompt="the", **GREEDY, **neutral)
    assert out.choices[0].text == want
    nulls = {"top_p": None, "seed": None, "n": None, "echo": None, "stream": None}
    r = httpx.post(f"{base}/completions", json={"prompt": "the", **GREEDY, **nulls})
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == want
    r = httpx.post(f"{base}/completions", json={"model": "lm", "prompt": None, "max_tokens": None})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 16
    assert r.json()["usage"]["prompt_tokens"] == 1  # bos for the empty prompt


def test_a_prompt_of_another_shape_is_refused_with_the_shapes_it_may_take(served):
    _, base = served
    for prompt in ([1.5], [[]], ["a", 1], [True]):
        r = httpx.post(f"{base}/completions", json={"model": "lm", "prompt": prompt})
        assert r.status_code == 422, prompt
        error = r.json()["error"]
        assert error["param"] == "prompt" and "list of token ids" in error["message"]
    r = httpx.post(f"{base}/completions", json={"model": "lm", "prompt": []})
    assert r.status_code == 422 and r.json()["error"]["param"] == "prompt"


def test_a_stream_that_fails_raises_openais_error_in_the_client(served, monkeypatch):
    from aiayn.serve.models import ServedModel

    def broken(self, *args, **kwargs):
        kwargs["emit"]("t")
        raise RuntimeError("the worker broke")

    client, _ = served
    monkeypatch.setattr(ServedModel, "complete", broken)
    stream = client.completions.create(prompt="the", stream=True, **GREEDY)
    assert next(stream).choices[0].text == "t"
    with pytest.raises(openai.APIError, match="inference failed: RuntimeError") as e:
        next(stream)
    assert e.value.body == {
        "message": "inference failed: RuntimeError: the worker broke",
        "type": "server_error",
        "param": None,
        "code": 500,
    }


def test_a_client_that_goes_away_stops_every_choice(model_dirs):
    """Streaming two prompts, the client leaves after the first chunk: the choice being
    generated stops after its current token and the next one never starts."""
    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    app = create_app([ModelSpec(model_dirs["lm"], "lm")], background=False)
    metrics = app.state.registry.metrics.registry

    def completions(reason: str) -> float:
        labels = {"model": "lm", "finish_reason": reason}
        return metrics.get_sample_value("aiayn_completions_total", labels) or 0.0

    body = {"prompt": ["the", "a"], "max_tokens": 512, "temperature": 0, "stream": True}
    with live_server(app) as port:
        with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/completions", json=body) as r:
            assert next(r.iter_lines()).startswith("data: {")
        deadline = time.monotonic() + 60
        while completions("cancelled") < 2:
            assert time.monotonic() < deadline, "the generation went on"
            time.sleep(0.05)
        assert completions("length") == completions("stop") == 0
        tokens = metrics.get_sample_value("aiayn_completion_tokens_total", {"model": "lm"})
        assert tokens < 512


@pytest.mark.parametrize(
    "route, body",
    [
        ("completions", {"model": "lm", "prompt": "the", "repetition_penalty": 1.3}),
        ("completions", {"model": "lm", "prompt": "the", "min_p": 0.1}),
        ("embeddings", {"model": "sentiment", "input": "gut", "truncate_prompt_tokens": 2}),
    ],
)
def test_another_servers_option_is_refused_not_ignored(served, route, body):
    """vLLM's and llama.cpp's sampling options, sent through ``extra_body``: OpenAI refuses
    a field it does not know, and so does this server, rather than sample without it."""
    client, _ = served
    create = client.completions.create if route == "completions" else client.embeddings.create
    name = list(body)[-1]
    base = {k: v for k, v in body.items() if k != name}
    with pytest.raises(openai.UnprocessableEntityError, match="not a field") as e:
        create(**base, extra_body={name: body[name]})
    assert e.value.body["param"] == name
    assert create(**base, extra_body={"api_key": "-"})  # LibreTranslate's place for the key
