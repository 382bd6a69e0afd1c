"""The loop an Argos Translate / LibreTranslate user runs: a package in, fine-tuned on their own
pairs, evaluated, and a package out that Argos Translate installs and translates with.

    python bench/finetune_argos.py [--work runs/finetune-argos] [--threads 1] [--steps N]

Every step is an ``aiayn`` command (printed as it runs) and is skipped when its output is
already there, so an interrupted run goes on where it stopped (the fine-tune itself resumes
from its last checkpoint):

1. ``aiayn export models/ding-de-en --format argos --quantize int8``: the package a
   LibreTranslate user has (int8, as Argos Translate's packages are);
2. ``aiayn import`` of that ``.argosmodel``;
3. ``aiayn evaluate`` of the import on the LibreOffice help's test split (greedy, sacreBLEU);
4. ``aiayn train configs/finetune-libreoffice.toml --set train.init_from='"IMPORT"'``: the
   package's model and tokenizer fine-tuned on the LibreOffice help's training pairs;
5. ``aiayn evaluate`` of the fine-tuned model on the same test split;
6. ``aiayn export --format argos --quantize int8`` of the fine-tuned model;
7. Argos Translate itself (in a child process whose home, caches and packages directory are
   temporary) installs each package with ``package.install_from_path`` and translates the
   test split with it as it translates for LibreTranslate: its tokenizer, the package's
   spaCy pipeline with spaCy's rule-based sentencizer (Argos's ``ARGOS_CHUNK_TYPE=SPACY``),
   CTranslate2 int8, beam 4, length penalty 0.2; sacreBLEU of both.

Appends a record to bench/results/finetune_argos.jsonl (docs/interop.md and
docs/performance.md quote it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import ROOT, write_result  # noqa: E402

MODEL = "models/ding-de-en"
CORPUS = "data/libreoffice-help-de-en"
CONFIG = "configs/finetune-libreoffice.toml"

ARGOS = """
import json, sys
from pathlib import Path
import ctranslate2, spacy
from argostranslate import package, translate
package.install_from_path(Path(sys.argv[1]))
[pkg] = package.get_installed_packages()
class Sentencizer:  # what Argos Translate's SpacySentencizerSmall does with a packaged spacy/
    def __init__(self, pkg):
        self.nlp = spacy.load(pkg.packaged_sbd_path, exclude=["parser"])
        self.nlp.add_pipe("sentencizer")
    def split_sentences(self, text):
        return [s.text for s in self.nlp(text).sents]
translator = ctranslate2.Translator(str(pkg.package_path / "model"), device="cpu",
                                    compute_type="int8", intra_threads=int(sys.argv[3]))
texts = json.loads(Path(sys.argv[2]).read_text())
out = [translate.apply_packaged_translation(pkg, t, translator, Sentencizer(pkg), 1)[0].value
       for t in texts]
print(json.dumps({"package": pkg.package_path.name, "from": pkg.from_code, "to": pkg.to_code,
                  "splitter": pkg.packaged_sbd_path.name, "translations": out}))
"""


TIMES = "minutes.json"  # in the work folder: each step's wall-clock minutes, over resumes


def run(argv: list[str], threads: int, work: Path, step: str) -> str:
    """Run ``aiayn ARGV`` (this checkout's sources) and return its stdout; its wall-clock
    minutes are added to ``step``'s in WORK/minutes.json."""
    print("$ aiayn " + " ".join(argv), file=sys.stderr, flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT / "src")}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "aiayn.cli", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE
    )
    add_minutes(work, step, start)
    if done.returncode:
        sys.exit(f"aiayn {argv[0]} failed (exit {done.returncode})")
    return done.stdout.decode()


def add_minutes(work: Path, step: str, start: float) -> None:
    path = work / TIMES
    times = json.loads(path.read_text()) if path.is_file() else {}
    times[step] = round(times.get(step, 0.0) + (time.perf_counter() - start) / 60, 2)
    path.write_text(json.dumps(times, indent=2) + "\n")


def read_lines(split: str, lang: str, limit: int) -> list[str]:
    import gzip

    lines = gzip.decompress((ROOT / CORPUS / f"{split}.{lang}.gz").read_bytes()).decode()
    lines = lines.split("\n")[:-1]
    return lines[:limit] if limit else lines


def evaluate(model: Path, out: Path, limit: int, threads: int) -> dict:
    """aiayn evaluate on the test split (greedy), kept in ``out``."""
    if not out.is_file():
        argv = ["evaluate", str(model), "--corpus", CORPUS, "--split", "test", "--samples", "0"]
        argv += ["--output", str(out.with_suffix(".hyp.txt"))]
        argv += ["--limit", str(limit)] if limit else []
        text = run(argv, threads, out.parent, f"evaluate {out.stem}")
        out.write_text(text[text.index("{") : text.rindex("}") + 1] + "\n")
    return json.loads(out.read_text())


def argos_translations(package: Path, texts: list[str], work: Path, threads: int) -> dict:
    """Argos Translate's translations of ``texts`` with ``package`` installed in a home of
    its own, kept in WORK/argos-NAME.json."""
    out = work / f"argos-{package.stem}.json"
    if out.is_file():
        return json.loads(out.read_text())
    print(f"$ argostranslate: install {package}, translate {len(texts)} texts", file=sys.stderr)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="argos-home-") as home:
        home = Path(home)
        (home / "texts.json").write_text(json.dumps(texts))
        env = {
            **os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
            "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config"),
            "ARGOS_PACKAGES_DIR": str(home / "packages"), "ARGOS_DEVICE_TYPE": "cpu",
            "OMP_NUM_THREADS": str(threads),
        }  # fmt: skip
        argv = [sys.executable, "-c", ARGOS, str(package.resolve()), str(home / "texts.json")]
        done = subprocess.run([*argv, str(threads)], env=env, capture_output=True, text=True)
    add_minutes(work, f"argos {package.stem}", start)
    if done.returncode:
        sys.exit(f"Argos Translate failed on {package}:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    out.write_text(json.dumps(result) + "\n")
    return result


def bleu(hypotheses: list[str], references: list[str]) -> dict:
    from sacrebleu.metrics import BLEU, CHRF

    bleu_metric, chrf_metric = BLEU(), CHRF()
    score = bleu_metric.corpus_score(hypotheses, [references])
    chrf = chrf_metric.corpus_score(hypotheses, [references])
    return {"bleu": round(score.score, 2), "chrf": round(chrf.score, 2),
            "bleu_signature": str(bleu_metric.get_signature())}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("runs/finetune-argos"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=0, help="train.max_steps (0: the config's)")
    parser.add_argument("--limit", type=int, default=0, help="test sentences (0: all)")
    args = parser.parse_args()
    work, threads = args.work, args.threads
    work.mkdir(parents=True, exist_ok=True)
    package, imported = work / "de_en.argosmodel", work / "imported"
    run_dir, tuned = work / "run", work / "finetuned.argosmodel"
    if not package.is_file():
        run(["export", MODEL, "--format", "argos", "--out", str(package), "--from", "de",
             "--to", "en", "--quantize", "int8"], threads, work, "export")  # fmt: skip
    if not (imported / "config.json").is_file():
        run(["import", str(package), "--out", str(imported)], threads, work, "import")
    before = evaluate(imported, work / "before.json", args.limit, threads)
    if not (run_dir / "model" / "config.json").is_file():
        train = ["train", CONFIG, "--out", str(run_dir), "--set", f'train.init_from="{imported}"',
                 "--set", f"train.threads={threads}"]  # fmt: skip
        train += ["--set", f"train.max_steps={args.steps}"] if args.steps else []
        run(train, threads, work, "train")
    after = evaluate(run_dir / "model", work / "after.json", args.limit, threads)
    if not tuned.is_file():
        run(["export", str(run_dir / "model"), "--format", "argos", "--out", str(tuned),
             "--quantize", "int8"], threads, work, "export fine-tuned")  # fmt: skip
    sources, references = read_lines("test", "de", args.limit), read_lines("test", "en", args.limit)
    argos = {}
    for name, path in (("before", package), ("after", tuned)):
        result = argos_translations(path, sources, work, threads)
        argos[name] = {**bleu(result["translations"], references), "package": result["package"],
                       "splitter": result["splitter"]}  # fmt: skip
    run_json = json.loads((run_dir / "run.json").read_text())
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    finish = next(m for m in reversed(metrics) if m.get("event") == "finish")
    minutes = json.loads((work / TIMES).read_text())
    record = {
        "model": MODEL,
        "corpus": CORPUS,
        "split": "test",
        "sentences": len(sources),
        "config": CONFIG,
        "decoding": "greedy (aiayn evaluate); Argos Translate: CTranslate2 int8, beam 4, "
        "length penalty 0.2, spaCy sentencizer",
        "aiayn_evaluate": {
            "before": {k: before[k] for k in ("bleu", "chrf", "valid_ppl")},
            "after": {k: after[k] for k in ("bleu", "chrf", "valid_ppl")},
            "bleu_signature": after["bleu_signature"],
        },
        "argos": argos,
        "steps": finish["step"],
        "train_minutes": round(finish["train_minutes"], 2),
        "threads": threads,
        "precision": run_json.get("precision"),
        "max_tokens": run_json["train"]["max_tokens"],
        "lr_scale": run_json["train"]["lr_scale"],
        "minutes": minutes,  # wall clock of each step (summed over resumes)
    }
    path = write_result("finetune_argos", record)
    print(json.dumps(record, indent=2))
    print(f"appended to {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
