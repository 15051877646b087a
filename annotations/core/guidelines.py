"""Markdown rendered safely: guidelines on the labelling page and the guides at /help/."""

from __future__ import annotations

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

# What guidelines need: text, emphasis, lists, links, headings, tables, code, images.
# Everything else (script, style, iframes, forms, event handlers, javascript: URLs) is
# removed by the sanitiser, whatever the Markdown produced.
ALLOWED_TAGS = {
    "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
    "a", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "img",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}}
URL_SCHEMES = {"http", "https", "mailto"}


def markdown_html(text: str, *, tags: set[str] | None = None,
                  attributes: dict[str, set[str]] | None = None, heading_shift: int = 0,
                  anchors: bool = False) -> str:
    """Markdown → sanitised HTML, the one renderer of the app (researchers' guidelines and
    the guides served at /help/). Whatever the source holds, nh3 keeps only ``tags`` and
    ``attributes`` (None: nh3's defaults) and http(s)/mailto links, with
    ``rel="noopener noreferrer"``. ``heading_shift`` moves headings down that many levels
    (largest first, so no heading is shifted twice). ``anchors`` gives every heading an id
    as GitHub does ("## The trace" → ``id="the-trace"``), so links such as
    ``guide.md#the-trace`` land on it (the guides; nh3's default attributes plus the id)."""
    extensions = ["tables", "sane_lists", "fenced_code", *(["toc"] if anchors else [])]
    html = markdown.markdown(text, extensions=extensions, output_format="html")
    for level in range(6 - heading_shift, 0, -1) if heading_shift else ():
        html = html.replace(f"<h{level}>", f"<h{level + heading_shift}>").replace(
            f"</h{level}>", f"</h{level + heading_shift}>")
    options: dict = {"url_schemes": URL_SCHEMES, "link_rel": "noopener noreferrer"}
    if tags is not None:
        options["tags"] = tags
    if anchors:
        attributes = {**(attributes if attributes is not None else nh3.ALLOWED_ATTRIBUTES),
                      **{f"h{n}": {"id"} for n in range(1, 7)}}
    if attributes is not None:
        options["attributes"] = attributes
    return nh3.clean(html, **options)


def guidelines_html(text: str) -> SafeString:
    """A study's or class's guidelines for the labelling page: ``ALLOWED_TAGS`` only;
    headings # and ## become h3/h4 so that they sit under the page's own headings."""
    if not text.strip():
        return mark_safe("")
    clean = markdown_html(text, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES,
                          heading_shift=2)
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 in markdown_html
