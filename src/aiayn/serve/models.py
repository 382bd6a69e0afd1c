"""The models a server holds: loaded once, each with its tokenizer, labels and languages.

Every method that computes runs on the model's worker thread (see ``batching``) and calls the
same library functions as the command line: ``translate`` (greedy / beam search),
``generate_steps`` (sampling), ``classify_texts``, ``embed_texts`` and
``translation_attention``.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.data.tokenizer import has_tokenizer
from aiayn.infer.attention import AttentionMap, translation_attention
from aiayn.infer.classify import classify_texts
from aiayn.infer.embed import embed_texts
from aiayn.infer.sampling import generate_steps
from aiayn.infer.translate import translate
from aiayn.model.quantize import stored_weights
from aiayn.modeldir import WEIGHTS_FILE, load_config, load_model_and_tokenizer


@dataclass(frozen=True)
class ModelSpec:
    """Where a served model lives and what it is called; ``languages`` overrides run.json;
    ``quantize`` ("int8") quantizes a float model's linear layers as it loads."""

    path: Path
    name: str
    languages: tuple[str, ...] | None = None
    quantize: str | None = None


def read_run(path: Path) -> dict:
    run_file = Path(path) / "run.json"
    if not run_file.is_file():
        return {}
    try:
        return json.loads(run_file.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{run_file}: not valid JSON ({e})") from None


def check_spec(spec: ModelSpec) -> str:
    """Check a model directory without loading its weights; returns its family."""
    config = load_config(spec.path)
    if not has_tokenizer(spec.path):
        raise FileNotFoundError(f"{spec.path}: no tokenizer (tokenizer.model or tokenizer.json)")
    run = read_run(spec.path)
    if config.family == "encoder-only" and config.n_classes and not run.get("labels"):
        raise ValueError(f"{spec.path}/run.json: a classifier needs its labels")
    if spec.languages is not None:
        want = 2 if config.family == "encoder-decoder" else 1
        if len(spec.languages) != want or not all(spec.languages):
            form = "SRC-TGT, e.g. de-en" if want == 2 else "one code, e.g. en"
            raise ValueError(
                f"--languages {'-'.join(spec.languages)!r} for {spec.name}: a "
                f"{config.family} model takes {form}"
            )
    return config.family


class ServedModel:
    """A loaded model with what the endpoints need to know about it."""

    def __init__(self, spec: ModelSpec) -> None:
        check_spec(spec)
        self.name, self.path = spec.name, Path(spec.path)
        self.model, self.tokenizer = load_model_and_tokenizer(  # checked together
            self.path, quantize=spec.quantize
        )
        self.config = self.model.config
        self.family = self.config.family
        run = read_run(self.path)
        data = run.get("data", {})
        self.labels: list[str] | None = run.get("labels") if self.config.n_classes else None
        self.context = int(data.get("block_size") or self.config.max_len)
        if self.family == "decoder-only" and self.config.pos_encoding == "learned":
            self.context = min(self.context, self.config.max_len)
        self.languages = spec.languages
        if self.languages is None and self.family == "encoder-decoder":
            if data.get("task", "translation") == "translation" and "src_lang" in data:
                self.languages = (data["src_lang"], data["tgt_lang"])
        self.parameters = stored_weights(self.model)  # int8 weights are buffers
        # OpenAI's "created": when the weights were written (Unix time), not when they loaded
        self.created = int((self.path / WEIGHTS_FILE).stat().st_mtime)

    @property
    def is_translator(self) -> bool:
        return self.family == "encoder-decoder"

    @property
    def is_classifier(self) -> bool:
        return self.family == "encoder-only" and bool(self.labels)

    @property
    def max_text_tokens(self) -> int:
        """The longest text (in tokens, before eos) the model reads whole."""
        return self.config.max_len - 1

    def token_counts(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer.encode(texts)]

    def describe(self) -> dict:
        return {
            "id": self.name,
            "object": "model",
            "created": self.created,
            "owned_by": "aiayn",
            "family": self.family,
            "parameters": self.parameters,
            "vocab_size": self.config.vocab_size,
            "max_len": self.config.max_len,
            "languages": list(self.languages) if self.languages else None,
            "labels": self.labels,
            "quantization": (getattr(self.model, "quantization", None) or {}).get("method"),
            "path": str(self.path),
        }

    # --- run on the worker thread -------------------------------------------------------

    def translate(self, texts: list[str], **options) -> list[list[tuple[str, float | None]]]:
        n_best = translate(self.model, self.tokenizer, texts, **options)
        return [[(t, None if math.isnan(s) else s) for t, s in hyps] for hyps in n_best]

    def classify(self, texts: list[str]) -> list[list[float]]:
        return classify_texts(self.model, self.tokenizer, texts, where=self.name).tolist()

    def embed(self, texts: list[str], normalize: bool = False) -> list[list[float]]:
        return embed_texts(self.model, self.tokenizer, texts, normalize=normalize).tolist()

    def attention(self, text: str, **options) -> AttentionMap:
        return translation_attention(self.model, self.tokenizer, text, **options)

    def prompt_ids(self, prompt: str) -> list[int]:
        return self.tokenizer.encode([prompt])[0] or [self.tokenizer.bos_id]

    def complete(
        self,
        prompt: list[int],
        max_tokens: int,
        temperature: float,
        top_k: int,
        top_p: float,
        seed: int | None,
        emit: Callable[[str], None] | None = None,
        stop: threading.Event | None = None,
    ) -> tuple[str, int, str]:
        """Sample a continuation of ``prompt``: (text, tokens generated, finish reason).

        ``emit`` receives the text as it grows (whole characters only); a set ``stop`` ends
        the generation after the current token (the client went away).
        """
        text = CompletionText(self.tokenizer, prompt)
        steps = generate_steps(
            self.model,
            torch.tensor([prompt]),
            max_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            eos_id=self.tokenizer.eos_id,
            seed=seed,
            context=self.context,
        )
        reason, n = "length", 0
        for new in steps:
            token = int(new[0, 0])
            if token == self.tokenizer.eos_id:
                reason = "stop"
                break
            n += 1
            delta = text.push(token)
            if emit is not None and delta:
                emit(delta)
            if stop is not None and stop.is_set():
                reason = "cancelled"
                break
        rest = text.flush()
        if emit is not None and rest:
            emit(rest)
        return text.completion, n, reason


class CompletionText:
    """The text a continuation adds to its prompt, released in whole characters.

    Byte-fallback pieces can split a character across tokens; text that ends in an
    incomplete character (U+FFFD) is held back until the next token completes it.
    """

    def __init__(self, tokenizer, prompt: list[int]) -> None:
        self.tokenizer, self.ids = tokenizer, list(prompt)
        self.prefix = tokenizer.decode([self.ids])[0]
        self.start = len(self.ids)
        self.sent = 0
        self.completion = ""

    def _text(self) -> str:
        full = self.tokenizer.decode([self.ids])[0]
        if full.startswith(self.prefix):
            return full[len(self.prefix) :]
        return self.tokenizer.decode([self.ids[self.start :]])[0]

    def push(self, token: int) -> str:
        self.ids.append(token)
        self.completion = self._text()
        ready = self.completion.rstrip("\ufffd")
        delta, self.sent = ready[self.sent :], max(self.sent, len(ready))
        return delta

    def flush(self) -> str:
        delta, self.sent = self.completion[self.sent :], len(self.completion)
        return delta
