"""docs/coverage.md is assembled from sections, each written by the command that computes
it: a section is Markdown that begins with its heading line ("## …") and runs to the next
"## " heading. :func:`write_section` puts one in place — replacing the section with the same
heading, or appending it at the end — and leaves every other line of the file as it was, so
that each coverage command (``manage.py validate_estimators --grid``, ``python -m
estimators.partitioned.coverage``, ``python -m estimators.assisted.coverage``, …) rewrites
only its own tables, and the hand-written index at the top of the file stays.

Pure text handling: no numbers are computed here."""

from __future__ import annotations

from pathlib import Path

SECTION_PREFIX = "## "


def _heading(section: str) -> str:
    first = section.lstrip("\n").split("\n", 1)[0]
    if not first.startswith(SECTION_PREFIX):
        raise ValueError(f"a section begins with its '## ' heading, not {first[:60]!r}")
    return first.rstrip()


def section_headings(text: str) -> list[str]:
    """The "## " headings of ``text``, in order."""
    return [line.rstrip() for line in text.splitlines() if line.startswith(SECTION_PREFIX)]


def section_text(text: str, heading: str) -> str | None:
    """The section of ``text`` under ``heading`` (its heading line included, up to the next
    "## " heading), or None."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == heading)
    except StopIteration:
        return None
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith(SECTION_PREFIX)), len(lines))
    return "\n".join(lines[start:end])


def replace_section(text: str, section: str) -> str:
    """``text`` with ``section`` in place of the section of the same heading (appended at
    the end when there is none). Sections are parted by one blank line; the text ends with
    one newline."""
    heading = _heading(section)
    body = section.strip("\n").splitlines() + [""]
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.rstrip() == heading]
    if len(starts) > 1:
        raise ValueError(f"{heading!r} heads {len(starts)} sections: merge them by hand")
    if not starts:
        while lines and not lines[-1].strip():
            lines.pop()
        return "\n".join(lines + ([""] if lines else []) + body).rstrip("\n") + "\n"
    start = starts[0]
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith(SECTION_PREFIX)), len(lines))
    return "\n".join(lines[:start] + body + lines[end:]).rstrip("\n") + "\n"


def write_section(path: str | Path, section: str) -> None:
    """Put ``section`` in place in the file at ``path`` (:func:`replace_section`); a file
    that does not exist yet is created with it alone."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    path.write_text(replace_section(text, section))


def emit(section: str, write: str | Path | None, stdout=None) -> None:
    """What every coverage command does with its section: put it in place in the file
    ``write`` (``--write docs/coverage.md``), or print it."""
    if write:
        write_section(write, section)
    else:
        import sys

        (stdout or sys.stdout).write(section.rstrip("\n") + "\n")


WRITE_HELP = ("put the section in place in this Markdown file (docs/coverage.md), leaving "
              "its other sections as they are; without it the section is printed")

__all__ = ["WRITE_HELP", "emit", "replace_section", "section_headings", "section_text",
           "write_section"]
