"""The sentence splitter an Argos Translate package carries, applied as Argos Translate applies
it.

Argos Translate translates sentence by sentence. Argos Translate 1.11 splits with MiniSBD (an
ONNX model: the package's ``minisbd/*.onnx``, else one it downloads for the source language on
first use), with Stanza where the package carries ``stanza/`` (its tokenizer), or, with
``ARGOS_CHUNK_TYPE=SPACY``, with spaCy (the package's ``spacy/`` pipeline, to which it adds
spaCy's rule-based sentencizer, else a multilingual model it downloads).

Nothing is downloaded here: ``package_splitter`` gives the splitter of what the package carries
(MiniSBD, Stanza or spaCy, in the order ``read_package`` prefers them, where that library is
installed), or None, and the caller then cuts text with aiayn's own splitting
(``aiayn.data.passages``: after ., !, ?, or … before a word). A package carrying none, or whose
library is missing (a warning says which), is so cut where Argos Translate would download
MiniSBD's model: the two may cut a text at other places (an abbreviation, a number with a
point).
"""

from __future__ import annotations

import hashlib
import threading
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path

from aiayn.interop.argos_package import ArgosPackage

Splitter = Callable[[str], list[str]]  # a text -> its sentences
# Argos Translate's codes where Stanza's differ (argostranslate.sbd.StanzaSentencizer)
STANZA_CODES = {"zt": "zh-hant", "pb": "pt"}


def _minisbd(package: ArgosPackage) -> Splitter | None:
    models = sorted(package.sentence_splitter_dir.glob("*.onnx"))
    if not models:
        return None
    from minisbd import SBDetect

    detector = SBDetect(str(models[0]), use_gpu=False)
    return detector.sentences


def _stanza(package: ArgosPackage) -> Splitter:
    import stanza

    pipeline = stanza.Pipeline(
        lang=STANZA_CODES.get(package.source, package.source),
        dir=str(package.sentence_splitter_dir),
        processors="tokenize",
        use_gpu=False,
        logging_level="WARNING",
        download_method=None,  # what the package carries, never a download
    )
    return lambda text: [sentence.text for sentence in pipeline(text).sentences]


def _spacy(package: ArgosPackage) -> Splitter:
    import spacy

    nlp = spacy.load(package.sentence_splitter_dir, exclude=["parser"])
    nlp.add_pipe("sentencizer")
    return lambda text: [sentence.text for sentence in nlp(text).sents]


READERS = {"minisbd": _minisbd, "stanza": _stanza, "spacy": _spacy}
LIBRARIES = {"minisbd": "minisbd", "stanza": "stanza", "spacy": "spacy"}
# the splitters loaded, by (kind, source language, their files' digest): packages carrying the
# same splitter share one (loading a spaCy pipeline takes 0.1-0.3 s), kept while one is used
_LOADED: weakref.WeakValueDictionary[tuple[str, str, str], Splitter] = weakref.WeakValueDictionary()
_LOADED_LOCK = threading.Lock()


def _files_digest(folder: Path) -> str:
    """SHA-256 over every file under ``folder``: its path there and its content."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def splitter_libraries(package: ArgosPackage) -> tuple[str, ...]:
    """The modules loading ``package``'s sentence splitter imports (none where it carries
    none)."""
    kind = package.sentence_splitter
    return () if kind is None else (LIBRARIES[kind],)


def package_splitter(package: ArgosPackage) -> Splitter | None:
    """The sentence splitter ``package`` carries (see the module), safe to call from several
    threads at once; None where it carries none this machine can run (a warning names what is
    missing). Packages whose splitters are the same files (the SHA-256 of each) for the same
    source language share one, loaded once while any is in use."""
    kind = package.sentence_splitter
    if kind is None:
        return None
    key = (kind, package.source, _files_digest(package.sentence_splitter_dir))
    with _LOADED_LOCK:  # one load of a splitter at a time, the first one kept for the others
        shared = _LOADED.get(key)
        if shared is None:
            shared = _loaded_splitter(package, kind)
            if shared is not None:
                _LOADED[key] = shared
        return shared


def _loaded_splitter(package: ArgosPackage, kind: str) -> Splitter | None:
    try:
        split = READERS[kind](package)
    except ImportError:
        warnings.warn(
            f"{package.name}: its {kind} sentence splitter needs {LIBRARIES[kind]} (pip install "
            f"{LIBRARIES[kind]}); aiayn's own sentence splitting cuts its texts",
            stacklevel=3,
        )
        return None
    except Exception as e:  # noqa: BLE001 - a splitter's data its library cannot read
        warnings.warn(
            f"{package.name}: its {kind} sentence splitter cannot be loaded ({type(e).__name__}: "
            f"{e}); aiayn's own sentence splitting cuts its texts",
            stacklevel=3,
        )
        return None
    if split is None:
        return None
    lock = threading.Lock()

    def sentences(text: str) -> list[str]:
        with lock:
            return [s for s in split(text) if s.strip()]

    return sentences
