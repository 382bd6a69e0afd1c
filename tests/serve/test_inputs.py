"""Reading what a request holds: whether a text has words to translate."""

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.serve.inputs import has_words

# the URLs and e-mail addresses ``has_words`` passes over, as an expression (the reference)
LINKS = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.)\S+|\S+@\S+\.\w+")
PARTS = ["a", "Z", "ä", "1", "0", ".", "@", ":", "/", "://", "www.", "w", "-", "_", "+", "!"]


def test_a_text_without_letters_outside_links_has_no_words():
    for text in ("😀", "42", "https://example.com/Haus", "www.example.de", "info@example.de"):
        assert not has_words(text), text
    for text in ("Hallo", "Siehe https://example.com", "Link:http://y", "mail: a@b.de", "é"):
        assert has_words(text), text


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from([*PARTS, " ", "\n"]), max_size=16).map("".join))
def test_links_are_found_as_the_expression_finds_them(text):
    assert has_words(text) == any(c.isalpha() for c in LINKS.sub(" ", text))


def test_a_long_word_is_read_in_time_in_proportion_to_it():
    """The expression, tried at every character, read a long word again from each: 20,000
    letters took 0.6 s on the server's event loop (time growing with the word's square)."""
    for word in ("a" * 200_000, "a" * 200_000 + "@", "a-" * 100_000, "1" * 200_000 + "://x"):
        start = time.perf_counter()
        has_words(word)
        assert time.perf_counter() - start < 2, word[:8]
