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


@register.inclusion_tag("assisted_dashboard/_audit.html", takes_context=True)
def ai_rater_audit(context, study) -> dict:
    """The AI rater's latest audit, the trust gate and κ with the study's human ratings
    (``services.gate.ai_rater_audit``); nothing without an audit or a gate. The link to the
    audit only for those who may read it (the study's researchers)."""
    from annotations.assisted.services.gate import ai_rater_audit as latest
    from annotations.core.services.studies import researcher_may_configure

    request = context.get("request")
    user = getattr(request, "user", None)
    may_read = bool(user and user.is_authenticated
                    and researcher_may_configure(user=user, study=study))
    return {"study": study, "trust": latest(study), "may_read": may_read}
