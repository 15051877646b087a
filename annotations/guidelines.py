"""Researchers' guidelines (Markdown) rendered safely for the labelling page."""

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


def guidelines_html(text: str) -> SafeString:
    """Markdown → HTML restricted to ``ALLOWED_TAGS`` (raw HTML in the source is escaped by
    the sanitiser's tag stripping; links get ``rel="noopener noreferrer"``). Headings # and
    ## become h3/h4 so that they sit under the page's own headings."""
    if not text.strip():
        return mark_safe("")
    html = markdown.markdown(text, extensions=["tables", "sane_lists", "fenced_code"],
                             output_format="html")
    for level in (2, 1):  # shift headings down two levels, largest last to avoid collisions
        html = html.replace(f"<h{level}>", f"<h{level + 2}>").replace(
            f"</h{level}>", f"</h{level + 2}>")
    clean = nh3.clean(html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES,
                      url_schemes=URL_SCHEMES, link_rel="noopener noreferrer")
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 just above
