"""``manage.py reproduce_nodata`` writes what ``estimators.nodata.reproduce`` computes."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from estimators.nodata.reproduce import reproduce


def _without_time(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "meta"}


def test_reproduce_nodata_writes_the_libraries_json(tmp_path, capsys):
    out = tmp_path / "nodata.json"
    call_command("reproduce_nodata", "--json", str(out), "--seeds", "2", "--rounds", "3")
    written = json.loads(out.read_text(encoding="utf-8"))
    expected = json.loads(json.dumps(reproduce(seeds=2, rounds=3)))
    assert _without_time(written) == _without_time(expected)
    assert "table2" in written and "table3" in written
    assert "dt_number" in written["table2"]


def test_reproduce_nodata_refuses_zero_seeds(tmp_path):
    with pytest.raises(CommandError, match="seeds"):
        call_command("reproduce_nodata", "--json", str(tmp_path / "x.json"), "--seeds", "0")
