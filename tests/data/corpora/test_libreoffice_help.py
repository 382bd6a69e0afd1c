"""Tests for corpus libreoffice-help-de-en: reading the rendered help pages."""

from __future__ import annotations

from aiayn.data.corpora.libreoffice_help import help_paragraphs


def test_help_paragraphs_align_ids_and_skip_mac_variants(tmp_path):
    page = tmp_path / "text" / "page.html"
    page.parent.mkdir()
    page.write_text(
        '<body><h1 id="hd_id1">Title <b>bold</b></h1><p id="other">x</p>'
        '<p id="par_id2" class="paragraph">Choose <span class="switchinline">'
        '<span hidden="true" id="MACx"><span>Preferences</span></span>'
        '<span hidden="true" id="defaultx">Tools - Options</span></span>.<br>Done</p></body>',
        encoding="utf-8",
    )
    assert help_paragraphs(tmp_path) == {
        ("text/page.html", "hd_id1"): "Title bold",
        ("text/page.html", "par_id2"): "Choose Tools - Options. Done",
    }
