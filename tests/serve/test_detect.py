"""``aiayn.serve.detect``: each text's language among a server's languages, short texts (under
20 characters) and long ones, text by text in a mixed batch, only ever a candidate."""

import random

import pytest

pytest.importorskip("fastapi")  # aiayn.serve
pytest.importorskip("lingua")
pytest.importorskip("lexilang")

from aiayn.serve.detect import SHORT, detect, ranked  # noqa: E402

LANGUAGES = ["de", "en", "fr", "es", "it", "pt", "nl"]
SHORT_TEXTS = {
    "de": ["Guten Morgen!", "Wo ist der Bahnhof?", "Ich bin müde.", "Vielen Dank"],
    "en": ["Good morning!", "I am tired.", "Thank you very much", "The house is small."],
    "fr": ["Bonjour à tous", "Où est la gare ?", "Je suis fatigué.", "Merci beaucoup"],
    "es": ["Buenos días", "Estoy cansado.", "Muchas gracias", "La casa es pequeña."],
    "it": ["Buongiorno a tutti", "Dov'è la stazione?", "Sono stanco.", "Grazie mille"],
    "pt": ["Bom dia a todos", "Estou cansado.", "Muito obrigado", "A casa é pequena."],
    "nl": ["Goedemorgen!", "Ik ben moe.", "Dank je wel", "Het huis is klein."],
}
LONG_TEXTS = {
    "de": ["Ich habe heute leider keine Zeit, aber morgen komme ich gerne vorbei."],
    "en": ["Unfortunately I have no time today, but I would be glad to come by tomorrow."],
    "fr": ["Je n'ai malheureusement pas le temps aujourd'hui, mais je passerai demain."],
    "es": ["Lamentablemente hoy no tengo tiempo, pero mañana pasaré con mucho gusto."],
    "it": ["Purtroppo oggi non ho tempo, ma domani passerò volentieri a trovarti."],
    "pt": ["Infelizmente hoje não tenho tempo, mas amanhã passo por aí com prazer."],
    "nl": ["Helaas heb ik vandaag geen tijd, maar morgen kom ik graag even langs."],
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_short_and_long_texts_are_found_in_their_language(language):
    texts = SHORT_TEXTS[language] + LONG_TEXTS[language]
    assert all(len(t) < SHORT for t in SHORT_TEXTS[language])
    assert all(len(t) >= SHORT for t in LONG_TEXTS[language])
    found = detect(texts, LANGUAGES)
    assert [code for code, _ in found] == [language] * len(texts), list(
        zip(texts, found, strict=True)
    )
    assert all(0 < confidence <= 100 for _, confidence in found)


def test_a_mixed_batch_is_detected_text_by_text():
    # LibreTranslate gives every text of a batch the batch's one detection
    texts = [(code, t) for code in LANGUAGES for t in SHORT_TEXTS[code][:2] + LONG_TEXTS[code]]
    random.Random(0).shuffle(texts)
    batch = detect([t for _, t in texts], LANGUAGES)
    assert [code for code, _ in batch] == [code for code, _ in texts]
    assert batch == [detect([t], LANGUAGES)[0] for _, t in texts]  # the same alone
    assert detect([t for _, t in texts], LANGUAGES) == batch  # and every time


def test_only_a_candidate_is_answered():
    texts = [*SHORT_TEXTS["fr"], *LONG_TEXTS["fr"]]
    assert {code for code, _ in detect(texts, ["de", "en"])} <= {"de", "en"}
    assert {code for code, _ in detect(texts, ["en", "fr"])} == {"fr"}
    # candidates in any case, answered as the server names them: lower case
    assert detect(LONG_TEXTS["de"], ["EN", "DE"])[0][0] == "de"


def test_a_text_without_words_is_the_first_candidate_with_no_confidence():
    texts = ["😀", "42", "3,14 %", "https://example.org/a?b=1", ""]
    assert detect(texts, ["en", "de"]) == [("en", 0.0)] * len(texts)
    # a sole candidate is every text's language
    assert detect(["Hallo Welt", "42"], ["de"]) == [("de", 100.0), ("de", 0.0)]
    with pytest.raises(ValueError, match="no candidate"):
        detect(["Hallo"], [])


def test_argos_codes_that_are_not_iso_are_answered_as_given():
    # Argos Translate names Brazilian Portuguese "pb" and traditional Chinese "zt"
    portuguese = [*SHORT_TEXTS["pt"], *LONG_TEXTS["pt"]]
    assert {code for code, _ in detect(portuguese, ["en", "pb"])} == {"pb"}
    assert detect(["我今天没有时间,明天再来看你。", "我很累"], ["en", "zt"]) == [
        ("zt", detect(["我今天没有时间,明天再来看你。"], ["en", "zh"])[0][1]),
        ("zt", detect(["我很累"], ["en", "zh"])[0][1]),
    ]


def test_a_code_the_detectors_do_not_know_is_never_answered_but_as_the_first():
    found = detect([*LONG_TEXTS["de"], *LONG_TEXTS["en"]], ["xx", "de", "en"])
    assert [code for code, _ in found] == ["de", "en"]
    assert detect(LONG_TEXTS["de"], ["xx", "yy"]) == [("xx", 0.0)]


def test_a_batch_ranked_by_the_characters_in_each_language():
    texts = ["Ich habe heute keine Zeit.", "Hello", "Das Wetter ist schön.", "42"]
    found = [("de", 100.0), ("en", 80.0), ("de", 90.0), ("de", 0.0)]
    # German: 26 + 21 characters at 100 and 90 (their mean by length: 95.5, rounded)
    assert ranked(texts, found) == [("de", 96.0), ("en", 80.0)]
    assert ranked(["42", "😀"], [("de", 0.0), ("de", 0.0)]) == [("de", 0.0)]
    assert ranked([], []) == []
