"""The heap trimmer: what it gives back, and that a training run leaves no thread behind."""

import subprocess
import sys
import threading
import time

import pytest

from aiayn.config import load_run_config
from aiayn.errors import UserError
from aiayn.train import heap
from aiayn.train.heap import HeapTrimmer
from aiayn.train.loop import Trainer
from tests.conftest import tiny_run_overrides

needs_trim = pytest.mark.skipif(heap._malloc_trim() is None, reason="no malloc_trim (not glibc)")

# A heap with 128 MB of holes: 4,096 blocks of 64 KB (below glibc's mmap threshold, so they
# live in the heap), every other one freed, so no two free blocks join and none reaches the top.
FRAGMENT = """
import sys, time
from aiayn.train.heap import HeapTrimmer

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

blocks = [bytearray(65536) for _ in range(4096)]
del blocks[::2]
before = rss_mb()
with HeapTrimmer(float(sys.argv[1])) as trimmer:
    time.sleep(0.5)
print(before - rss_mb(), trimmer.trims)
"""


@needs_trim
@pytest.mark.parametrize("period", [0.05, 0.0])
def test_the_free_pages_inside_the_heap_go_back_to_the_system(period):
    done = subprocess.run(
        [sys.executable, "-c", FRAGMENT, str(period)], capture_output=True, text=True, check=True
    )
    freed_mb, trims = done.stdout.split()
    if period:
        assert float(freed_mb) > 64 and int(trims) >= 2  # most of the 128 MB of holes
    else:
        assert float(freed_mb) < 16 and int(trims) == 0  # glibc alone keeps them


@needs_trim
def test_a_run_trims_while_it_trains_and_leaves_no_thread(sample_corpus, tmp_path, monkeypatch):
    run = load_run_config(
        None, tiny_run_overrides(sample_corpus, max_steps=3) + ["train.trim_heap_every=0.01"]
    )
    trainer = Trainer(run, tmp_path, progress=False)
    seen = []
    step = trainer.train_step

    def watched(group):
        time.sleep(0.05)  # long enough for a trim
        seen.append({t.name for t in threading.enumerate()})
        return step(group)

    monkeypatch.setattr(trainer, "train_step", watched)
    trainer.fit()
    assert all("aiayn-heap-trim" in names for names in seen) and len(seen) == 3
    assert "aiayn-heap-trim" not in {t.name for t in threading.enumerate()}


def test_without_malloc_trim_it_warns_and_starts_nothing(monkeypatch):
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    with pytest.warns(UserWarning, match="no malloc_trim"):
        trimmer = HeapTrimmer(1.0)
    with trimmer:
        assert "aiayn-heap-trim" not in {t.name for t in threading.enumerate()}
    assert trimmer.trims == 0


@pytest.mark.parametrize("value", [-1, "often", 1e9])
def test_the_period_is_checked(sample_corpus, value):
    with pytest.raises(UserError, match=r"train\.trim_heap_every must be"):
        load_run_config(
            None, tiny_run_overrides(sample_corpus) + [f"train.trim_heap_every={value!r}"]
        )
