"""``Generator``: a decoder-only model continuing prompts (Phuong & Hutter 2022, Algorithm 14)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence

import torch

from aiayn.api.base import LoadedModel
from aiayn.api.options import check_int, decoded_sampling
from aiayn.api.preparation import text_list
from aiayn.api.results import Generation
from aiayn.errors import OptionError
from aiayn.infer.sampling import Sampling, generate_steps

SAMPLING = Sampling()  # temperature 1, no filters, seed 0


class Generator(LoadedModel):
    """Continue prompts with a decoder-only model and its KV cache::

    gen = aiayn.load("runs/lm/model")
    out = gen.generate(["Call me"], max_new_tokens=20, sampling=aiayn.Sampling(seed=1))
    print(out[0].text)
    stream = gen.stream("Call me", max_new_tokens=20)
    for piece in stream:
        print(piece, end="")
    print(stream.finish())
    """

    family = "decoder-only"

    @property
    def context(self) -> int:
        """The longest input the model was trained on (``context_length``): a longer prompt
        keeps its last tokens."""
        return context_length(self.config, self.run)

    def prompt_ids(self, prompt: str) -> list[int]:
        """The token ids of ``prompt``; bos for an empty one."""
        return self.tokenizer.encode([prompt])[0] or [self.config.bos_id]

    def stream(
        self,
        prompt: str | Sequence[int],
        *,
        max_new_tokens: int = 200,
        sampling: Sampling = SAMPLING,
        stop_at_eos: bool = True,
        stop: Sequence[str] = (),
    ) -> TextStream:
        """An iterator over the text each new token adds ("" while a character is still
        incomplete); stopping the iteration stops the generation. ``finish()`` then gives
        the text held back, and ``text`` / ``tokens`` / ``finish_reason`` the result.

        ``stop``: strings that end the continuation where one first appears (finish reason
        "stop"), left out of the text; text that may begin one is held back until it cannot."""
        check_int("max_new_tokens", max_new_tokens, 0)
        if not isinstance(sampling, Sampling):
            raise OptionError(
                f"sampling must be an aiayn.Sampling, got {type(sampling).__name__}", "sampling"
            )
        stops = stop_strings(stop)
        ids = self.prompt_ids(prompt) if isinstance(prompt, str) else list(prompt)
        return TextStream(self, ids, max_new_tokens, decoded_sampling(sampling), stop_at_eos, stops)

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int = 200,
        sampling: Sampling = SAMPLING,
        stop_at_eos: bool = True,
        stop: Sequence[str] = (),
    ) -> list[Generation]:
        """A continuation of each prompt: up to ``max_new_tokens`` tokens drawn as
        ``sampling`` says (temperature 0 is greedy), stopping at eos with ``stop_at_eos``
        and before the first of the ``stop`` strings. With a seed, a prompt's continuation
        does not depend on the other prompts."""
        out = []
        for prompt in text_list(prompts, "prompts"):
            ids = self.prompt_ids(prompt)
            if len(ids) > self.context:
                warnings.warn(
                    f"only the last {self.context} tokens of the prompt are used", stacklevel=2
                )
            stream = self.stream(
                ids,
                max_new_tokens=max_new_tokens,
                sampling=sampling,
                stop_at_eos=stop_at_eos,
                stop=stop,
            )
            for _ in stream:
                pass
            stream.finish()
            out.append(stream.result())
        return out


class TextStream:
    """The continuation of one prompt, token by token (see ``Generator.stream``)."""

    def __init__(
        self,
        gen: Generator,
        prompt: list[int],
        max_new: int,
        sampling: Sampling,
        stop: bool,
        stops: tuple[str, ...] = (),
    ) -> None:
        self.gen, self.prompt = gen, prompt
        self.max_new, self.sampling, self.stop_at_eos = max_new, sampling, stop
        self.tokens: list[int] = []
        self.finish_reason: str | None = None
        self._text = CompletionText(gen.tokenizer, prompt, stops)
        self._steps = self._run()

    def __iter__(self) -> Iterator[str]:
        return self._steps

    def _run(self) -> Iterator[str]:
        gen, s = self.gen, self.sampling
        eos = gen.config.eos_id
        steps = generate_steps(
            gen.model,
            torch.tensor([self.prompt], device=gen.device),
            self.max_new,
            s.temperature,
            s.top_k,
            s.top_p,
            eos if self.stop_at_eos else None,
            s.seed,
            gen.context,
        )
        for new in steps:
            token = int(new[0, 0])
            if self.stop_at_eos and token == eos:
                self.finish_reason = "stop"
                return
            self.tokens.append(token)
            delta = self._text.push(token)
            if self._text.stopped:  # a stop string: the text ends before it
                self.finish_reason = "stop"
                if delta:
                    yield delta
                return
            yield delta
        self.finish_reason = "length"

    def finish(self) -> str:
        """End the generation (a stream stopped early is "cancelled") and return the text
        not yet given out."""
        self._steps.close()
        if self.finish_reason is None:
            self.finish_reason = "cancelled"
        return self._text.flush()

    @property
    def text(self) -> str:
        """The continuation so far."""
        return self._text.completion

    def result(self) -> Generation:
        full = self.gen.tokenizer.decode([self.prompt + self.tokens])[0]
        if self._text.stopped:  # the tokens spell the stop string too
            full = self._text.prefix + self.text
        return Generation(
            self.text, tuple(self.tokens), full, len(self.prompt), self.finish_reason or ""
        )


class CompletionText:
    """The text a continuation adds to its prompt, released in whole characters.

    Byte-fallback pieces can split a character across tokens; text that ends in an
    incomplete character (U+FFFD) is held back until the next token completes it, and text
    that may begin one of the ``stops`` strings until it cannot (``stopped`` once one is
    complete: the completion then ends before it).
    """

    def __init__(self, tokenizer, prompt: list[int], stops: tuple[str, ...] = ()) -> None:
        self.tokenizer, self.ids, self.stops = tokenizer, list(prompt), stops
        self.stopped = False
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
        if self.stops:
            found = [i for i in (ready.find(s) for s in self.stops) if i >= 0]
            if found:
                self.completion = ready = ready[: min(found)]
                self.stopped = True
            else:
                ready = ready[: len(ready) - _stop_prefix(ready, self.stops)]
        delta, self.sent = ready[self.sent :], max(self.sent, len(ready))
        return delta

    def flush(self) -> str:
        delta, self.sent = self.completion[self.sent :], len(self.completion)
        return delta


def context_length(config, run: dict) -> int:
    """The longest input a language model of ``config`` was trained on: its run.json's
    (``run``) block_size, else max_len, within a learned position table."""
    block = run.get("data", {}).get("block_size") or config.max_len
    return config.clamp_length(int(block))


def stop_strings(stop: Sequence[str] | str) -> tuple[str, ...]:
    """``stop`` as a tuple of non-empty strings (one string is one stop string)."""
    stops = (stop,) if isinstance(stop, str) else tuple(stop)
    for s in stops:
        if not isinstance(s, str) or not s:
            raise OptionError(f"stop: each stop string must be non-empty text, got {s!r}", "stop")
    return stops


def _stop_prefix(text: str, stops: tuple[str, ...]) -> int:
    """The length of the longest end of ``text`` that begins one of ``stops``."""
    return max(
        (
            n
            for s in stops
            for n in range(min(len(s) - 1, len(text)), 0, -1)
            if text.endswith(s[:n])
        ),
        default=0,
    )
