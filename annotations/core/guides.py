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

DOCS = Path(settings.BASE_DIR) / "docs"
GUIDES = {"manager": "manager.md", "estimators": "estimators.md", "coverage": "coverage.md",
          "rater": "rater.md", "assisted-studies": "assisted-studies.md",
          "critique-studies": "critique-studies.md", "annotator-critique": "annotator-critique.md",
          "manager-assisted": "manager-assisted.md", "assisted-analysis": "assisted-analysis.md",
          "confidence-bands": "confidence-bands.md", "audit": "audit.md",
          "nodata": "nodata.md"}
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
    by_file = {file.removesuffix(".md"): page for page, file in GUIDES.items()}

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
    title = next((line.lstrip("# ").strip() for line in text.splitlines()
                  if line.startswith("# ")), path.stem)
    return title, _rewrite_links(markdown_html(text))


def guide_html(page: str) -> tuple[str, str]:
    """(title, sanitised HTML) of the guide ``page`` (a key of ``GUIDES``)."""
    path = DOCS / GUIDES[page]
    return _render(path, path.stat().st_mtime)
