"""The public Python API: ``aiayn.load(path)`` gives one object per model family.

::

    import aiayn

    tr = aiayn.load("models/ding-de-en")                    # a Translator
    for t in tr.translate(["Guten Morgen.", "Wie geht es?"], beam=4):
        print(t.text, t.score)                              # best hypothesis, log P / lp
    tr.score(["Guten Morgen."], ["Good morning."])          # teacher-forced log P(target|source)

``Generator`` (decoder-only: ``generate``, ``stream``), ``Classifier`` (``classify``,
``probabilities``) and ``Encoder`` (``embed``) work alike. Options are keyword-only; bad ones
raise ``aiayn.errors.OptionError`` (a ``UserError``) naming the option. The command line and
the server are thin layers over these objects.
"""

from aiayn.api.encoder import Classifier, Encoder, ensemble_probabilities
from aiayn.api.generator import Generator, TextStream
from aiayn.api.load import load, load_for
from aiayn.api.results import Classification, Generation, Hypothesis, Translation
from aiayn.api.translator import Translator
from aiayn.data.terminology import PLACEHOLDERS, Glossary
from aiayn.infer.sampling import Sampling

__all__ = [
    "Classification",
    "Classifier",
    "Encoder",
    "Generation",
    "Generator",
    "Glossary",
    "Hypothesis",
    "PLACEHOLDERS",
    "Sampling",
    "TextStream",
    "Translation",
    "Translator",
    "ensemble_probabilities",
    "load",
    "load_for",
]
