"""The users' guides under ``docs/`` served by the app (``/help/<page>/``): Markdown rendered
with python-markdown, then sanitised with nh3 (an allow-list of tags and attributes), so
the page is safe whatever the file holds. Links between guides and to their pictures are
rewritten to the app's own URLs."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

DOCS = Path(settings.BASE_DIR) / "docs"
# /help/<role>/ for every role (each labelling page, dashboard and the admin link theirs),
# then the guides they link to. A file served under two names (the role "annotator" and
# the older "annotator-critique") is linked to by its first.
ROLE_GUIDES = {"specialist": "specialist.md", "rater": "rater.md",
               "annotator": "annotator-critique.md", "manager": "manager.md",
               "researcher": "researcher.md", "reviewer": "reviewer.md",
               "operator": "operations.md"}
GUIDES = {**ROLE_GUIDES, "annotator-critique": "annotator-critique.md",
          "manager-assisted": "manager-assisted.md", "assisted-studies": "assisted-studies.md",
          "assisted-analysis": "assisted-analysis.md", "critique-studies": "critique-studies.md",
          "critique-analysis": "critique-analysis.md", "ai-providers": "ai-providers.md",
          "estimators": "estimators.md", "coverage": "coverage.md",
          "confidence-bands": "confidence-bands.md", "performance": "performance.md",
          "scaling": "scaling.md",
          "performance-history": "performance-history.md",
          "audit": "audit.md", "nodata": "nodata.md",
          "evaluation-service": "evaluation-service.md",
          "evaluation-example": "evaluation-example.md", "eval-logs": "eval-logs.md"}
# What each role does, in the words of the /help/ index (one line under each guide's title,
# in the reader's language; the guides themselves are written in English).
ROLE_WHO = {"specialist": _("Answers yes-or-no questions about one class of a partitioned "
                           "study."),
            "rater": _("Rates sentences of an AI's answers, with or without an AI fact-check."),
            "annotator": _("Writes answers, critiques and critiques of critiques."),
            "manager": _("Follows a study's progress and figures on its dashboard."),
            "researcher": _("Sets studies up, imports their data, runs audits and evaluations."),
            "reviewer": _("Accepts or rejects answers and settles items whose answers "
                          "disagree."),
            "operator": _("Installs, runs and backs up the platform.")}
IMAGE_NAME = re.compile(r"^[\w-]+\.(png|svg)$")
_GUIDE_LINK = re.compile(r'href="(?P<page>[\w-]+)\.md(?P<anchor>#[\w-]*)?"')
_IMAGE_SRC = re.compile(r'src="img/(?P<name>[\w-]+\.(?:png|svg))"')


def guide_image_path(name: str) -> Path | None:
    """docs/img/<name> when ``name`` is a plain picture file name that exists."""
    if not IMAGE_NAME.match(name):
        return None
    path = DOCS / "img" / name
    return path if path.is_file() else None


def _rewrite_links(html: str) -> str:
    by_file: dict[str, str] = {}
    for page, file in GUIDES.items():
        by_file.setdefault(file.removesuffix(".md"), page)

    def guide(match: re.Match) -> str:
        page = by_file.get(match["page"])
        if page is None:
            return match[0]
        return f'href="{reverse("help-page", args=[page])}{match["anchor"] or ""}"'

    html = _GUIDE_LINK.sub(guide, html)
    return _IMAGE_SRC.sub(lambda m: f'src="{reverse("help-image", args=[m["name"]])}"', html)


@lru_cache(maxsize=8)
def _render(path: Path, mtime: float) -> tuple[str, str]:
    from annotations.core.guidelines import markdown_html

    text = path.read_text(encoding="utf-8")
    title = next((line.lstrip("# ").strip().replace("`", "") for line in text.splitlines()
                  if line.startswith("# ")), path.stem)  # a title is plain text: no code marks
    return title, _rewrite_links(markdown_html(text, anchors=True))


def guide_html(page: str) -> tuple[str, str]:
    """(title, sanitised HTML) of the guide ``page`` (a key of ``GUIDES``)."""
    path = DOCS / GUIDES[page]
    return _render(path, path.stat().st_mtime)


def guide_index() -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """The ``/help/`` index: (role page, guide title, who it is for) for every role guide,
    then (page, title) of every other guide, each file once, in ``GUIDES`` order."""
    roles = [(page, guide_html(page)[0], ROLE_WHO[page]) for page in ROLE_GUIDES]
    seen = set(ROLE_GUIDES.values())
    others = []
    for page, file in GUIDES.items():
        if file not in seen:
            seen.add(file)
            others.append((page, guide_html(page)[0]))
    return roles, others
