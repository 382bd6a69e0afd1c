"""``aiayn translate --sample``: reproducible samples, n-best output, flags validated."""

import io

import pytest

from aiayn.cli import main
from tests.test_cli_e2e import trained  # noqa: F401  (the module's tiny trained run)

LINES = "Das ist gut.\nIch komme morgen.\nWo ist der Bahnhof?\n"


def translate(run, monkeypatch, capsys, *flags, text=LINES):
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code = main(["translate", str(run / "model"), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sampled_nbest_is_reproducible_and_independent_of_batching(
    trained,  # noqa: F811
    monkeypatch,
    capsys,
):
    _, run = trained
    flags = ["--sample", "--temperature", "1.5", "--top-p", "0.95", "--seed", "7", "--nbest", "4"]
    code, out, _ = translate(run, monkeypatch, capsys, *flags)
    assert code == 0
    rows = [line.split("\t") for line in out.splitlines()]
    assert [r[0] for r in rows] == ["0"] * 4 + ["1"] * 4 + ["2"] * 4
    assert all(float(r[1]) < 0 for r in rows)  # log-probabilities under the model
    assert len({r[2] for r in rows}) > 3  # samples, not four copies of one translation
    assert translate(run, monkeypatch, capsys, *flags)[1] == out  # same seed, same samples
    # one line at a time (other batches, other chunks): every line samples the same
    assert translate(run, monkeypatch, capsys, *flags, "--chunk", "1")[1] == out
    assert translate(run, monkeypatch, capsys, *flags[:-2], "--seed", "8")[1] != out


def test_sampling_at_temperature_zero_is_greedy(trained, monkeypatch, capsys):  # noqa: F811
    _, run = trained
    greedy = translate(run, monkeypatch, capsys)[1]
    assert translate(run, monkeypatch, capsys, "--sample", "--temperature", "0")[1] == greedy
    assert translate(run, monkeypatch, capsys, "--sample", "--top-k", "1")[1] == greedy


def test_a_tiny_top_p_samples_the_greedy_translation(trained, monkeypatch, capsys):  # noqa: F811
    _, run = trained
    greedy = translate(run, monkeypatch, capsys)[1]
    code, out, err = translate(run, monkeypatch, capsys, "--sample", "--top-p", "5e-324")
    assert code == 0, err
    assert out == greedy


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--sample", "--temperature", "nan"], "--temperature: must be a finite number >= 0"),
        (["--sample", "--temperature", "-1"], "--temperature: must be a finite number >= 0"),
        (["--sample", "--top-k", "0"], "--top-k: must be >= 1"),
        (["--sample", "--top-p", "0"], "--top-p: must be in (0.0, 1.0]"),
        (["--sample", "--top-p", "1.5"], "--top-p: must be in (0.0, 1.0]"),
        (["--sample", "--top-p", "nan"], "--top-p: must be in (0.0, 1.0]"),
        (["--sample", "--seed", "-3"], "--seed: must be in [0, "),
        (["--sample", "--nbest", "0"], "--nbest: must be >= 1"),
        (["--sample", "--beam", "4"], "--sample draws one token at a time"),
        (["--sample", "--early-stop"], "--early-stop is for beam search"),
        (["--temperature", "0.5"], "--temperature needs --sample"),
        (["--seed", "1"], "--seed needs --sample"),
        (["--chunk", "0"], "--chunk: must be >= 1"),
    ],
)
def test_bad_sampling_flags_are_named(monkeypatch, capsys, tmp_path, flags, message):
    # checked before the model is read: no model directory needed
    monkeypatch.setattr("sys.stdin", io.StringIO("Hallo.\n"))
    assert main(["translate", str(tmp_path / "no-model"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_line_break_in_a_translation_keeps_one_output_line_per_input():
    from aiayn.cli.translate import one_line

    assert one_line("a\nb\u2028c\rd\te") == "a b c d\te"
    assert one_line("a\nb\tc", tabs=True) == "a b c"
    assert one_line("x\x85y\x0cz").splitlines() == ["x y z"]
