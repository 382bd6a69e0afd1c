"""Word alignments from cross-attention, on the shipped model: words as a person reads them,
each target word aligned once, the pairs a person would draw on plain sentences, and the same
pairs through the API, the command line and the server."""

import io

import pytest
import torch

import aiayn
from aiayn.cli import main
from aiayn.infer.alignment import align, word_ids
from aiayn.infer.translate import source_ids

SENTENCES = ["Das ist ein gutes Buch.", "Der Hund schläft im Garten."]


@pytest.fixture(scope="module")
def translator(shipped_copy):
    return aiayn.load(shipped_copy)


def test_pieces_are_grouped_into_the_words_of_the_text():
    pieces = ["\u2581Das", "\u2581ist", "\u2581ein", "\u2581gut", "es", "\u2581Buch", ".", "</s>"]
    assert word_ids(pieces) == [0, 1, 2, 3, 3, 4, 4, None]
    chars = ["D", "a", "s", " ", "i", "s", "t", "</s>"]  # a character tokenizer
    assert word_ids(chars) == [0, 0, 0, None, 1, 1, 1, None]


def test_each_target_word_is_aligned_once_to_a_source_word(translator):
    for sentence, t in zip(SENTENCES, translator.translate(SENTENCES, alignment=True), strict=True):
        pairs = t.alignment
        assert [j for _, j in pairs] == list(range(len(t.text.split())))
        assert all(0 <= i < len(sentence.split()) for i, _ in pairs)


def test_plain_sentences_align_as_a_person_would(translator):
    book, dog = translator.translate(SENTENCES, alignment=True)
    assert book.text == "That’s a good book." and dog.text == "The dog is in the garden."
    assert {(3, 2), (4, 3)} <= set(book.alignment)  # gutes-good, Buch.-book.
    assert {(0, 0), (1, 1), (4, 5)} <= set(dog.alignment)  # Der-The, Hund-dog, Garten.-garden.


def test_the_alignment_is_the_argmax_of_the_last_layers_head_averaged_attention(translator):
    model, tokenizer = translator.model, translator.tokenizer
    (src,), _ = source_ids(model, tokenizer, [SENTENCES[1]])
    tokens = list(translator.translate([SENTENCES[1]])[0].tokens)
    record: dict = {}
    with torch.no_grad():
        model(torch.tensor([src]), torch.tensor([[model.config.bos_id] + tokens[:-1]]),
              attention=record)  # fmt: skip
    weights = record["cross"][-1][0].mean(0)  # (T, S)
    # this sentence's pieces are whole words (and "." joined to the last), so rows are words
    src_words = word_ids([tokenizer.id_to_piece(i) for i in src])
    tgt_words = word_ids([tokenizer.id_to_piece(i) for i in tokens])
    for i, j in align(model, tokenizer, src, tokens):
        rows = [r for r, w in enumerate(tgt_words) if w == j]
        by_word = [
            float(sum(weights[rows, c].mean() for c, w in enumerate(src_words) if w == word))
            for word in range(max(w for w in src_words if w is not None) + 1)
        ]
        assert i == max(range(len(by_word)), key=by_word.__getitem__)


def test_the_command_line_and_the_server_give_the_same_pairs(translator, monkeypatch, capsys):
    want = translator.translate(SENTENCES, alignment=True)
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(SENTENCES) + "\n"))
    assert main(["translate", str(translator.path), "--alignment"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for line, t in zip(lines, want, strict=True):
        text, pairs = line.split("\t")
        assert text == t.text and pairs == " ".join(f"{i}-{j}" for i, j in t.alignment)
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx2")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.models import ModelSpec
    from tests.serve.conftest import wait_ready

    with TestClient(create_app([ModelSpec(translator.path, "ding")], ServeConfig())) as client:
        wait_ready(client)
        r = client.post("/v1/translate", json={"text": SENTENCES, "alignment": True})
        got = [[tuple(p) for p in t["alignment"]] for t in r.json()["translations"]]
        assert got == [list(t.alignment) for t in want]
        r = client.post("/v1/translate", json={"text": SENTENCES})
        assert all(t["alignment"] is None for t in r.json()["translations"])
