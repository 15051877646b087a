"""docs/coverage.md's sections: each command replaces its own and leaves the others."""

import pytest

from estimators.numerics.coverage_doc import (
    emit,
    replace_section,
    section_headings,
    section_text,
    write_section,
)

DOC = "# Title\n\nintro\n\n## A\n\nold a\n\n## B\n\nb text\n"


def test_a_section_replaces_its_own_and_keeps_the_rest():
    out = replace_section(DOC, "## A\n\nnew a\nmore\n")
    assert out == "# Title\n\nintro\n\n## A\n\nnew a\nmore\n\n## B\n\nb text\n"
    # the last section too, and the result ends with one newline
    out = replace_section(DOC, "## B\nnew b")
    assert out == "# Title\n\nintro\n\n## A\n\nold a\n\n## B\nnew b\n"


def test_a_new_section_is_appended_and_writing_twice_changes_nothing():
    once = replace_section(DOC, "## C\n\nc\n")
    assert once.endswith("b text\n\n## C\n\nc\n")
    assert replace_section(once, "## C\n\nc\n") == once
    assert section_headings(once) == ["## A", "## B", "## C"]
    assert section_text(once, "## B") == "## B\n\nb text\n"
    assert section_text(once, "## D") is None


def test_a_heading_only_prefix_of_another_is_not_confused():
    doc = "## A: x\n\none\n\n## A\n\ntwo\n"
    assert replace_section(doc, "## A\n\n2\n") == "## A: x\n\none\n\n## A\n\n2\n"


def test_refused_without_a_heading_or_with_a_duplicate():
    with pytest.raises(ValueError, match="begins with its '## ' heading"):
        replace_section(DOC, "no heading\n")
    with pytest.raises(ValueError, match="heads 2 sections"):
        replace_section(DOC + "\n## A\n\nagain\n", "## A\n\nx\n")


def test_write_section_creates_the_file_and_emit_prints_without_a_path(tmp_path, capsys):
    path = tmp_path / "coverage.md"
    write_section(path, "## A\n\na\n")
    write_section(path, "## B\n\nb\n")
    write_section(path, "## A\n\na2\n")
    assert path.read_text() == "## A\n\na2\n\n## B\n\nb\n"
    emit("## C\n\nc", None)
    assert capsys.readouterr().out == "## C\n\nc\n"
    emit("## C\n\nc", path)
    assert path.read_text().endswith("## C\n\nc\n")
