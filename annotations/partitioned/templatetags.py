"""Dashboard helpers: plain-language tooltips that also work on touch screens, and numbers
that say "no data" instead of a placeholder."""

from __future__ import annotations

from django import template
from django.utils.html import format_html

from annotations.core.templatetags import term_tip
from annotations.partitioned.dashboard import GLOSSARY

register = template.Library()


@register.simple_tag
def tip(key: str, label: str = "") -> str:
    """A term of the partitioned dashboard's glossary with its meaning (``term_tip``)."""
    return term_tip(*GLOSSARY[key], label)


@register.simple_tag
def no_data() -> str:
    return format_html('<span class="nodata" title="{}">no data</span>', GLOSSARY["no_data"][1])


@register.filter
def num(value, digits: int = 3) -> str:
    """A number with ``digits`` decimals, or "—" for None (never a placeholder figure)."""
    if value is None or value == "":
        return "—"
    return f"{float(value):.{int(digits)}f}"
