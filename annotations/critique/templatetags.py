"""Critique dashboard helpers: the tooltips of its own glossary (the same markup as
``dashboard_tags.tip``) and an interval cell."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from annotations.core.templatetags import term_tip
from annotations.critique.dashboard import GLOSSARY

register = template.Library()


@register.simple_tag
def ctip(key: str, label: str = "") -> str:
    """A term of the critique dashboard's glossary with its meaning (``term_tip``)."""
    return term_tip(*GLOSSARY[key], label)


@register.simple_tag
def interval(cell, digits: int = 3, signed: bool = False) -> str:
    """"0.812 [0.770, 0.850]" from an interval cell, "—" without data."""
    if not cell or cell.get("value") is None:
        return mark_safe('<span class="nodata" title="No data yet">—</span>')  # noqa: S308
    fmt = f"{{:{'+' if signed else ''}.{int(digits)}f}}"
    value = fmt.format(cell["value"])
    if cell.get("lower") is None or cell.get("upper") is None:
        return format_html("{}", value)
    css = ""
    if signed:
        css = "gain-pos" if cell["lower"] > 0 else "gain-neg" if cell["upper"] < 0 else ""
    return format_html('<span class="{}">{}</span> <span class="ci">[{}, {}]</span>', css, value,
                       fmt.format(cell["lower"]), fmt.format(cell["upper"]))
