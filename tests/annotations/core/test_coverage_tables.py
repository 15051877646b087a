"""manage.py coverage_tables runs a family's coverage table from the project's command line."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from estimators.nodata.coverage import AUDIT_HEADING


def test_a_family_table_is_written_in_place(tmp_path):
    doc = tmp_path / "coverage.md"
    doc.write_text(f"# Coverage\n\n## Kept\n\nhand text\n\n{AUDIT_HEADING}\n\nold\n")
    call_command("coverage_tables", "nodata", "--write", str(doc), stdout=StringIO())
    text = doc.read_text()
    assert text.startswith("# Coverage\n\n## Kept\n\nhand text\n\n" + AUDIT_HEADING)
    assert "old" not in text and "| 1000 | 95.0" in text


def test_without_write_the_section_is_printed():
    out = StringIO()
    call_command("coverage_tables", "nodata", stdout=out)
    assert out.getvalue().startswith(AUDIT_HEADING)


def test_options_the_family_refuses_are_an_error():
    with pytest.raises(CommandError, match="coverage_tables assisted"):
        call_command("coverage_tables", "assisted", "--bogus", stdout=StringIO(),
                     stderr=StringIO())
    with pytest.raises(CommandError):
        call_command("coverage_tables", "nowhere", stdout=StringIO())
