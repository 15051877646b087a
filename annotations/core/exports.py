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
import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import translation

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


CHUNK_CHARS = 1 << 16  # a streamed export's pieces: about 64 kB each


def rows_chunks(rows: Iterable[dict], *, fmt: str = "csv",
                fields: list[str] | None = None) -> Iterator[str]:
    """``rows`` as ``fmt`` (csv or jsonl, the module's contract) in pieces of about
    ``CHUNK_CHARS`` characters, as they are made: what a streamed download sends (memory
    bounded by one piece, whatever the number of rows)."""
    if fmt not in FORMATS:
        raise ValueError(f"format: csv or jsonl, got '{fmt}'")
    buffer = io.StringIO()
    if fmt == "jsonl":
        def put(row: dict) -> None:
            buffer.write(json.dumps(row, ensure_ascii=False))
            buffer.write("\n")
    else:
        if fields is None:
            rows = list(rows)
            fields = list(dict.fromkeys(key for row in rows for key in row))
        writer = csv.DictWriter(buffer, fieldnames=fields, restval="", extrasaction="ignore",
                                lineterminator="\n")
        writer.writeheader()

        def put(row: dict) -> None:
            writer.writerow({key: csv_cell(value) for key, value in row.items()})
    for row in rows:
        put(row)
        if buffer.tell() >= CHUNK_CHARS:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue()


def rows_write(rows: Iterable[dict], *, out: IO[str], fmt: str = "csv",
               fields: list[str] | None = None) -> int:
    """Write ``rows`` to ``out`` as ``fmt`` (csv or jsonl); returns how many rows."""
    counted = _Counted(rows)
    for chunk in rows_chunks(counted, fmt=fmt, fields=fields):
        out.write(chunk)
    return counted.n


class _Counted:
    """An iterable of rows that counts the rows taken from it."""

    def __init__(self, rows: Iterable[dict]) -> None:
        self.rows, self.n = rows, 0

    def __iter__(self) -> Iterator[dict]:
        for row in self.rows:
            self.n += 1
            yield row


def excluded_requested(request: HttpRequest) -> bool:
    """``?excluded=include``: the export keeps excluded answers, with their column."""
    params = getattr(request, "query_params", request.GET)
    return params.get("excluded") == "include"


def requested_format(request: HttpRequest) -> str:
    """``?format=`` of a download: csv or jsonl (anything else is csv)."""
    fmt = request.GET.get("format", "csv")
    return fmt if fmt in FORMATS else "csv"


def download(filename: str, fmt: str = "csv") -> HttpResponse:
    """An empty attachment response of ``fmt``'s content type, for ``rows_write`` to fill."""
    response = HttpResponse(content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@dataclass(frozen=True)
class _Export:
    title: str
    rows: Callable[..., Iterable[dict]]
    fields: list[str] | None
    answers: tuple[str, type] | None


# Raw exports of every study type, registered by each type's ``hooks``: kind → what →
# (title, rows(study) → the rows, in order, streamed from the database; the CSV columns, or
# None for every key; for an export of answers, the row's key holding the answer's id and
# the answer model). Served by ``core.views.study_export`` and the API's ``StudyExportApi``
# to the study's researchers and managers, and by the types' commands.
_EXPORTS: dict[str, dict[str, _Export]] = {}


def export_register(kind: str, what: str, title: str, rows: Callable[..., Iterable[dict]],
                    fields: list[str] | None, *, answers: tuple[str, type] | None = None
                    ) -> None:
    _EXPORTS.setdefault(kind, {})[what] = _Export(title, rows, fields, answers)


def exports_of(kind: str) -> list[tuple[str, str]]:
    """(what, title) of every raw export a study of ``kind`` offers, the first the default."""
    return [(what, e.title) for what, e in _EXPORTS.get(kind, {}).items()]


def _in_english(rows: Iterable[dict]) -> Iterator[dict]:
    """The rows read in English whatever the reader's language: a file's words (a rating's
    ``confidence_label``…) are data, the same for every download. The language is switched
    inside the generator, which a streamed response runs after its view returned."""
    with translation.override("en"):
        yield from rows


def exports_of_answers(kind: str) -> set[str]:
    """The exports of ``kind`` whose rows are answers (``?excluded=include`` applies)."""
    return {what for what, e in _EXPORTS.get(kind, {}).items() if e.answers is not None}


def _rows_and_fields(study, export: _Export, excluded: bool
                     ) -> tuple[Iterable[dict], list[str] | None]:
    """An export's rows and columns: of an export of answers, without the excluded answers
    (``core.exclusion_models``) — or, ``excluded``, with all of them and a column
    ``excluded`` (true/false)."""
    rows, fields = _in_english(export.rows(study)), export.fields
    if export.answers is None:
        return rows, fields
    from annotations.core.exclusion_models import ExcludedAnswer

    key, model = export.answers
    out = set(ExcludedAnswer.ids(study, model).values_list("answer_id", flat=True))

    def kept() -> Iterator[dict]:
        for row in rows:
            left_out = row[key] in out
            if excluded:
                yield {**row, "excluded": left_out}
            elif not left_out:
                yield row

    if excluded and fields is not None:
        fields = [*fields, "excluded"]
    return kept(), fields


def export_write(study, what: str, out: IO[str], fmt: str, *, excluded: bool = False) -> int:
    """Write the export ``what`` of ``study``; KeyError for one its type does not offer."""
    rows, fields = _rows_and_fields(study, _EXPORTS[study.kind][what], excluded)
    return rows_write(rows, out=out, fmt=fmt, fields=fields)


def export_response(study, what: str | None, fmt: str, *, excluded: bool = False
                    ) -> StreamingHttpResponse:
    """The download of ``what`` (default: the type's first export) as ``fmt``, streamed
    as its rows are read (no length known in advance; memory bounded by one piece); 404
    for a study type without exports. ``excluded``: with the excluded answers and their
    column (``_rows_and_fields``)."""
    offered = exports_of(study.kind)
    if not offered:
        raise Http404("This study type has no export.")
    what = what if what in dict(offered) else offered[0][0]
    rows, fields = _rows_and_fields(study, _EXPORTS[study.kind][what], excluded)
    response = StreamingHttpResponse(rows_chunks(rows, fmt=fmt, fields=fields),
                                     content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-{what}.{fmt}"'
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
    """The rows of ``study``'s figure ``name`` (KeyError for a figure its type lacks), in
    English whatever the reader's language (``_in_english``)."""
    with translation.override("en"):
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
