"""Writing rows as CSV or JSONL, one way for every study type's raw exports and every
dashboard figure's CSV, and the download response that carries them.

Contract of ``rows_write``:

* JSONL — one ``json.dumps(row)`` per line, text as it is (the exact, machine-readable form);
* CSV — a header of ``fields`` (or, without them, every key in first-seen order), one line per
  row; a missing or ``None`` value is an empty cell, a list or a dict is its JSON, and a text
  that a spreadsheet would run as a formula (it begins with ``= + - @``, a tab or a carriage
  return; an AI system named "=HYPERLINK(…)") begins with an apostrophe (OWASP's CSV
  injection advice). Keys outside ``fields`` are left out.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from typing import IO

from django.http import Http404, HttpRequest, HttpResponse

FORMATS = ("csv", "jsonl")
CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/jsonl"}
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """One CSV cell by the contract above."""
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str) and value[:1] in _FORMULA_STARTS:
        return "'" + value
    return value


def rows_write(rows: Iterable[dict], *, out: IO[str], fmt: str = "csv",
               fields: list[str] | None = None) -> int:
    """Write ``rows`` to ``out`` as ``fmt`` (csv or jsonl); returns how many rows."""
    if fmt not in FORMATS:
        raise ValueError(f"format: csv or jsonl, got '{fmt}'")
    n = 0
    if fmt == "jsonl":
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
        return n
    if fields is None:
        rows = list(rows)
        fields = list(dict.fromkeys(key for row in rows for key in row))
    writer = csv.DictWriter(out, fieldnames=fields, restval="", extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: csv_cell(value) for key, value in row.items()})
        n += 1
    return n


def requested_format(request: HttpRequest) -> str:
    """``?format=`` of a download: csv or jsonl (anything else is csv)."""
    fmt = request.GET.get("format", "csv")
    return fmt if fmt in FORMATS else "csv"


def download(filename: str, fmt: str = "csv") -> HttpResponse:
    """An empty attachment response of ``fmt``'s content type, for ``rows_write`` to fill."""
    response = HttpResponse(content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# Raw exports of every study type, registered by each type's ``hooks``: kind → what →
# (title, write(study=, out=, fmt=) → rows written). Served by ``core.views.study_export``
# and the API's ``StudyExportApi`` to the study's researchers and managers.
_EXPORTS: dict[str, dict[str, tuple[str, Callable[..., int]]]] = {}


def export_register(kind: str, what: str, title: str, write: Callable[..., int]) -> None:
    _EXPORTS.setdefault(kind, {})[what] = (title, write)


def exports_of(kind: str) -> list[tuple[str, str]]:
    """(what, title) of every raw export a study of ``kind`` offers, the first the default."""
    return [(what, title) for what, (title, _) in _EXPORTS.get(kind, {}).items()]


def export_write(study, what: str, out: IO[str], fmt: str) -> int:
    """Write the export ``what`` of ``study``; KeyError for one its type does not offer."""
    return _EXPORTS[study.kind][what][1](study=study, out=out, fmt=fmt)


def export_response(study, what: str | None, fmt: str) -> HttpResponse:
    """The download of ``what`` (default: the type's first export) as ``fmt``; 404 for a
    study type without exports."""
    offered = exports_of(study.kind)
    if not offered:
        raise Http404("This study type has no export.")
    what = what if what in dict(offered) else offered[0][0]
    response = download(f"study-{study.pk}-{what}.{fmt}", fmt)
    export_write(study, what, response, fmt)
    return response


# The CSV of every figure and table a dashboard draws, registered by each type's ``hooks``:
# kind → name → (title, rows(payload, study) → rows). ``payload`` is the latest snapshot's;
# the rows are the numbers the figure draws. Served by ``core.views.figure_csv`` to the
# study's researchers and managers (as they may read the dashboard) and linked by
# ``{% figure_csv study name %}`` under each figure.
_FIGURES: dict[str, dict[str, tuple[str, Callable[..., list[dict]]]]] = {}


def figures_register(kind: str, figures: dict[str, tuple[str, Callable[..., list[dict]]]]
                     ) -> None:
    _FIGURES.setdefault(kind, {}).update(figures)


def figures_of(kind: str) -> list[tuple[str, str]]:
    """(name, title) of every figure whose CSV a dashboard of ``kind`` offers."""
    return [(name, title) for name, (title, _) in _FIGURES.get(kind, {}).items()]


def figure_rows(study, name: str, payload: dict) -> list[dict]:
    """The rows of ``study``'s figure ``name`` (KeyError for a figure its type lacks)."""
    return _FIGURES[study.kind][name][1](payload, study)


def figure_response(study, name: str) -> HttpResponse:
    """The CSV download of ``study``'s figure ``name`` from its latest snapshot; 404 for a
    figure its type does not draw, or before the first snapshot."""
    from annotations.core.selectors import study_latest_snapshot

    if name not in _FIGURES.get(study.kind, {}):
        raise Http404("No such figure.")
    snapshot = study_latest_snapshot(study=study)
    if snapshot is None:
        raise Http404("No figures yet: they appear once the first answer is analysed.")
    response = download(f"study-{study.pk}-{name}-snapshot-{snapshot.pk}.csv")
    rows_write(figure_rows(study, name, snapshot.payload), out=response)
    return response
