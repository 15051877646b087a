"""Tooltips of the assisted dashboard (its own glossary; the same markup as ``tip``)."""

from __future__ import annotations

from django import template

from annotations.assisted.dashboard import GLOSSARY
from annotations.core.templatetags import term_tip

register = template.Library()


@register.simple_tag
def atip(key: str, label: str = "") -> str:
    """A term of the assisted dashboard's glossary with its meaning (``term_tip``)."""
    return term_tip(*GLOSSARY[key], label)


@register.filter
def pct(value, digits: int = 0) -> str:
    """A share as a percentage ("—" for None)."""
    if value is None or value == "":
        return "—"
    return f"{100 * float(value):.{int(digits)}f} %"


@register.filter
def signed(value, digits: int = 3) -> str:
    """A difference with its sign ("—" for None)."""
    if value is None or value == "":
        return "—"
    return f"{float(value):+.{int(digits)}f}"
