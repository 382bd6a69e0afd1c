import pytest
import torch

from aiayn import build_model
from aiayn.errors import UserError
from aiayn.fileio import atomic_write
from aiayn.train import checkpoint as ckpt
from tests.tolerance import assert_close_to_scale


def test_averaging_two_copies_returns_the_model(tiny):
    model = build_model(tiny)
    state = model.state_dict()
    averaged = ckpt.average_state_dicts([state, {k: v.clone() for k, v in state.items()}])
    for k, v in state.items():
        torch.testing.assert_close(averaged[k], v, atol=0, rtol=0)


def test_averaging_is_the_element_wise_mean(tiny, tmp_path):
    a, b = build_model(tiny).state_dict(), build_model(tiny).state_dict()
    for i, s in enumerate((a, b)):
        ckpt.save_checkpoint(tmp_path, i + 1, {"model": s}, keep=5)
    averaged = ckpt.average_checkpoints(ckpt.list_checkpoints(tmp_path))
    name = "encoder.layers.0.ffn.linear1.weight"
    assert_close_to_scale(averaged[name], (a[name] + b[name]) / 2)
    model = build_model(tiny)
    model.load_state_dict(averaged)  # the averaged weights load as a model
    assert model.unembed.weight is model.src_embed.token.weight  # and stay tied


def test_only_the_last_k_are_kept(tmp_path):
    for step in (5, 10, 15, 20):
        ckpt.save_checkpoint(tmp_path, step, {"step": step}, keep=2)
    kept = ckpt.list_checkpoints(tmp_path)
    assert [ckpt.load_checkpoint(p)["step"] for p in kept] == [15, 20]


def test_a_save_killed_half_way_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    ckpt.save_checkpoint(tmp_path, 1, {"step": 1, "w": torch.ones(3)}, keep=5)

    def dies_half_way(obj, f):
        f.write(b"PK\x03\x04 half a file")
        raise KeyboardInterrupt  # killed mid-write

    monkeypatch.setattr(torch, "save", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint(tmp_path, 2, {"step": 2}, keep=5)
    monkeypatch.undo()
    kept = ckpt.list_checkpoints(tmp_path)
    assert [p.name for p in kept] == ["checkpoint-00000001.pt"]
    assert ckpt.load_checkpoint(kept[-1])["step"] == 1
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def test_atomic_write_replaces_whole_files_only(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("old")

    def fail(p):
        p.write_text("new but incomplete")
        raise OSError("disk full")

    with pytest.raises(UserError, match="cannot write .*file.txt: disk full"):
        atomic_write(target, fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"]  # no temporary file left


def test_a_damaged_checkpoint_is_named(tmp_path):
    bad = tmp_path / "checkpoint-00000007.pt"
    bad.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="checkpoint-00000007.pt: unreadable checkpoint"):
        ckpt.load_checkpoint(bad)


def test_averaging_holds_one_state_at_a_time_and_equals_the_mean_of_a_list(tiny):
    import gc
    import weakref

    class State(dict):  # a dict that a weak reference can follow
        pass

    states = [build_model(tiny).state_dict() for _ in range(3)]
    alive = []

    def one_at_a_time():
        for s in states:
            gc.collect()
            assert not any(ref() is not None for ref in alive), "an earlier state is still held"
            state = State({k: v.clone() for k, v in s.items()})
            alive.append(weakref.ref(state))
            yield state
            del state

    streamed = ckpt.average_state_dicts(one_at_a_time())
    listed = ckpt.average_state_dicts(states)
    assert list(streamed) == list(states[0])
    for k, v in listed.items():
        torch.testing.assert_close(streamed[k], v, atol=0, rtol=0)
        assert streamed[k].dtype == states[0][k].dtype
    other = {k: v for k, v in states[1].items() if "decoder" not in k}
    with pytest.raises(UserError, match="b has other parameters than a"):
        ckpt.average_state_dicts(iter([states[0], other]), ["a", "b"])
    with pytest.raises(UserError, match="no checkpoints to average"):
        ckpt.average_state_dicts(iter([]))
