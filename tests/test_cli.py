from aiayn.cli import main


def test_params_prints_the_paper_totals(capsys):
    assert main(["params", "base"]) == 0
    out = capsys.readouterr().out
    assert "63,082,496" in out and "encoder feed-forward" in out
    assert main(["params", "big"]) == 0
    assert "214,245,376" in capsys.readouterr().out


def test_version_is_the_installed_packages(capsys):
    import importlib.metadata

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.split() == ["aiayn", importlib.metadata.version("aiayn")]
