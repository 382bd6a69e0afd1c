"""The readers every command shares, on any bytes at all: the right text, or a UserError that
names the place (file, line, column); never another exception."""

import io
import json
import re
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.cli import _stdin_lines
from aiayn.errors import UserError, decode_utf8
from aiayn.fileio import read_json_object
from aiayn.modeldir import load_config
from aiayn.train.rundir import repair_metrics

LINES = st.lists(
    st.one_of(st.binary(max_size=12), st.text(max_size=12).map(str.encode)), max_size=8
).map(b"\n".join)


@settings(max_examples=300, deadline=None)
@given(LINES)
def test_decode_utf8_names_the_first_bad_line_and_column(data):
    try:
        text = decode_utf8(data, "f.txt")
    except UserError as e:
        line, column, byte = re.search(
            r"line (\d+): not UTF-8 \(byte 0x(..) at column (\d+)", str(e)
        ).group(1, 3, 2)
        bad_line = data.split(b"\n")[int(line) - 1]
        with pytest.raises(UnicodeDecodeError):
            bad_line.decode("utf-8")
        assert all(
            earlier.decode("utf-8") is not None for earlier in data.split(b"\n")[: int(line) - 1]
        )
        assert bad_line[int(column) - 1] == int(byte, 16)
        return
    assert text.encode("utf-8") == data


@settings(max_examples=300, deadline=None)
@given(LINES)
def test_stdin_lines_are_the_lines_or_a_user_error(data):
    expected = [line.removesuffix(b"\r") for line in data.split(b"\n")]
    if data.endswith(b"\n") or not data:
        expected = expected[:-1] if data else []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
        replaced = list(_stdin_lines("replace"))
        assert replaced == [line.decode("utf-8", "replace").rstrip("\r") for line in expected]
        mp.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
        try:
            strict = list(_stdin_lines("strict"))
        except UserError as e:
            number = int(re.search(r"stdin, line (\d+)", str(e)).group(1))
            with pytest.raises(UnicodeDecodeError):
                expected[number - 1].decode("utf-8")
            return
        assert strict == replaced


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=80),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda c: (
                st.lists(c, max_size=3)
                | st.dictionaries(
                    st.sampled_from(["model", "d_model", "n_heads", "family", "x"]), c, max_size=4
                )
            ),
            max_leaves=8,
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_any_config_json_loads_or_is_named(tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("m")
    (directory / "config.json").write_bytes(data)
    with pytest.raises(UserError, match="config.json"):
        load_config(directory)  # no such bytes hold every architecture key
    try:
        read_json_object(directory / "config.json")
    except UserError as e:
        assert "config.json" in str(e)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=20),
            st.builds(lambda s: json.dumps({"step": s}).encode(), st.integers(0, 9)),
        ),
        max_size=8,
    ),
    st.integers(0, 9),
)
def test_repair_metrics_keeps_every_json_record_up_to_the_step(tmp_path_factory, lines, step):
    path = tmp_path_factory.mktemp("r") / "metrics.jsonl"
    path.write_bytes(b"\n".join(lines))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        repair_metrics(path, step)
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(isinstance(r, dict) and r.get("step", 0) <= step for r in kept)
    wanted = []
    for line in lines:
        try:
            record = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            continue
        if isinstance(record, dict) and not (
            isinstance(record.get("step"), int) and record["step"] > step
        ):
            wanted.append(record)
    assert kept == wanted
