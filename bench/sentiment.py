"""Sentiment accuracy on the Rotten Tomatoes test split: our classifiers vs TF-IDF + logistic
regression (scikit-learn), on the same split.

    python bench/sentiment.py [MODEL_DIR ...] [MODEL_DIR+MODEL_DIR+...] [--split valid]

A ``+``-joined list of model directories is an ensemble (probabilities averaged, as
``aiayn classify DIR DIR ...`` does).

Prints a table and appends a record to bench/results/sentiment.jsonl.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from aiayn.data.files import read_labelled  # noqa: E402
from aiayn.infer.classify import class_probabilities  # noqa: E402
from common import write_result  # noqa: E402

CORPUS = Path("data/rotten-tomatoes")


def tfidf_baseline(train, test) -> float:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)
    x_train = vectorizer.fit_transform([t for t, _ in train])
    classifier = LogisticRegression(C=4.0, max_iter=2000)
    classifier.fit(x_train, [label for _, label in train])
    predicted = classifier.predict(vectorizer.transform([t for t, _ in test]))
    return float(sum(p == label for p, (_, label) in zip(predicted, test, strict=True)) / len(test))


def model_accuracy(model_dirs: list[Path], test) -> float:
    """Test accuracy of one classifier, or of the ensemble of several."""
    labels, probs = class_probabilities(model_dirs, [text for text, _ in test])
    predicted = [labels[i] for i in probs.argmax(-1).tolist()]
    return sum(p == label for p, (_, label) in zip(predicted, test, strict=True)) / len(test)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "model_dirs", nargs="*", help="a model directory, or DIR+DIR+... (ensemble)"
    )
    parser.add_argument("--split", default="test", choices=("test", "valid"))
    args = parser.parse_args()
    train, test = read_labelled(CORPUS, "train"), read_labelled(CORPUS, args.split)
    majority = max(
        sum(label == name for _, label in test) for name in {label for _, label in test}
    ) / len(test)
    rows = {
        "majority class": majority,
        "TF-IDF (1-2 grams) + logistic regression": tfidf_baseline(train, test),
    }
    for spec in args.model_dirs:
        rows[f"aiayn {spec}"] = model_accuracy([Path(d) for d in spec.split("+")], test)
    print(f"{'classifier':<60} {args.split + ' accuracy':>14}")
    for name, acc in rows.items():
        print(f"{name:<60} {acc:>14.4f}")
    path = write_result("sentiment", {"split": args.split, "examples": len(test), "accuracy": rows})
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
