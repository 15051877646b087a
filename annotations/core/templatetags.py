"""The ``chart_tags`` library every dashboard loads. Colour keys and filled bars as SVG: a
colour or a width that comes from the data would otherwise need an inline ``style``
attribute, which the Content-Security-Policy refuses (docs/operations.md); SVG's own
attributes (``fill``, ``width``) are not styles. ``approximate_mark`` after an interval whose
real coverage is not its level. And ``term_tip``, the markup of a term with
its meaning that each study type's glossary tag (``tip``, ``atip``, ``ctip``) renders."""

from __future__ import annotations

from django import template
from django.utils.html import format_html, format_html_join

register = template.Library()


@register.simple_tag
def color_key(color: str, dashed: bool = False, cls: str = "key") -> str:
    """A legend's colour key: a dot, or a short bar for a dashed line."""
    if dashed:
        return format_html('<svg class="{} dashed" viewBox="0 0 10 10" preserveAspectRatio="none" '
                           'aria-hidden="true"><rect y="3" width="10" height="4" fill="{}"/>'
                           '</svg>', cls, color)
    return format_html('<svg class="{}" viewBox="0 0 10 10" aria-hidden="true">'
                       '<circle cx="5" cy="5" r="5" fill="{}"/></svg>', cls, color)


@register.simple_tag
def share_bar(share: float | None = None, percent: float | None = None, cls: str = "bar") -> str:
    """A bar filled to ``share`` (0–1) or ``percent`` (0–100); its box is the CSS class's."""
    value = float(percent) / 100 if percent is not None else float(share or 0)
    width = min(max(value, 0.0), 1.0) * 100
    return format_html('<svg class="{}" viewBox="0 0 100 1" preserveAspectRatio="none" '
                       'aria-hidden="true"><rect width="{}" height="1"/></svg>',
                       cls, f"{width:.1f}")


@register.simple_tag
def time_bars(histogram: list[int], labels: list[str]) -> str:
    """A worker's seconds per answer as a small bar chart (one bar per bin of
    ``estimators.numerics.workers.TIME_EDGES``), its counts in words for screen readers."""
    top = max(histogram) if histogram and max(histogram) else 1
    words = ", ".join(f"{label}: {n}" for label, n in zip(labels, histogram, strict=True))
    bars = format_html_join("", '<rect x="{}" y="{}" width="8" height="{}"/>', (
        (i * 10, f"{20 - 20 * n / top:.1f}", f"{20 * n / top:.1f}")
        for i, n in enumerate(histogram)))
    return format_html('<svg class="time-bars" viewBox="0 0 {} 20" role="img" aria-label="{}">'
                       "{}</svg>", 10 * len(histogram), f"Seconds per answer — {words}", bars)


def term_tip(short: str, meaning: str, label: str = "") -> str:
    """A term with its meaning: ``title`` for a mouse, and an "i" that opens on a tap or
    a key press (``<details>``: no script needed). Every dashboard's tooltip tag uses it
    with its own glossary."""
    return format_html(
        '<span class="term" title="{}">{}</span><details class="tip"><summary '
        'aria-label="What does {} mean?">i</summary><span class="tip-text" role="note">{}'
        "</span></details>", meaning, label or short, label or short, meaning)


@register.inclusion_tag("annotations/_downloads.html")
def downloads(study) -> dict:
    """The raw exports of ``study``'s type, each as CSV and JSONL (``core.exports``)."""
    from annotations.core.exports import exports_of, exports_of_answers

    return {"study": study, "exports": exports_of(study.kind),
            "of_answers": exports_of_answers(study.kind)}


@register.simple_tag
def study_page(study) -> str:
    """The URL of the page where ``study`` is configured (its type's, ``study_page_url``)."""
    from annotations.core.views import study_page_url

    return study_page_url(study)


@register.simple_tag(takes_context=True)
def dashboard_panels(context, study) -> str:
    """The panels registered for every dashboard (``core.views.dashboard_panel_register``)."""
    from django.utils.safestring import mark_safe

    from annotations.core.views import dashboard_panels as panels

    request = context.get("request")
    if request is None:
        return ""
    return mark_safe("".join(panels(request, study)))  # noqa: S308 - rendered templates


@register.inclusion_tag("annotations/_flagged.html", takes_context=True)
def flagged(context, study) -> dict:
    """What a dashboard's estimates include of the study's flagged items (open flags; the
    withdrawn ones are left out), how many answers reviewers rejected and how many
    exclusions took out (left out too), with the Review and Workers pages' links for those
    who may open them."""
    from annotations.core.models import StudyMembership
    from annotations.core.reviews.registry import reviewable
    from annotations.core.reviews.selectors import study_left_out_counts
    from annotations.core.selectors import user_roles
    from annotations.core.services.flags import flaggable

    request = context.get("request")
    user = getattr(request, "user", None)
    roles = user_roles(user=user, study=study) if user and user.is_authenticated else set()
    counts, rejected, excluded = study_left_out_counts(study=study)
    return {"study": study, "counts": counts, "rejected": rejected, "excluded": excluded,
            "noun": flaggable(study.kind).noun, "answer_noun": reviewable(study.kind).noun,
            "researcher": StudyMembership.Role.RESEARCHER in roles,
            "reviewer": bool(roles & {StudyMembership.Role.RESEARCHER,
                                      StudyMembership.Role.REVIEWER})}


@register.inclusion_tag("annotations/_workers_compact_slot.html")
def workers_compact(study) -> dict:
    """Where the dashboard's compact Workers table goes: loaded by htmx as the page opens
    (``core.reviews.workers_views.workers_compact_part``: its reads stay out of the
    dashboard's own), with the full page's link for a browser without script."""
    return {"study": study}


@register.simple_tag
def approximate_mark(cell, note: str = "approximate") -> str:
    """After an interval: the mark of an approximate one (``cell["approximate"]``, an
    estimates cell of a snapshot), a link to the dashboard's note ``#<note>`` that says
    why; nothing otherwise."""
    if not cell or not (cell.get("approximate") if isinstance(cell, dict)
                        else getattr(cell, "approximate", False)):
        return ""
    return format_html(' <a class="approx" href="#{}" data-testid="approximate" title="Few '
                       'events: the real coverage of this interval is not 95 % (see the note '
                       'below)">≈ approximate</a>', note)


@register.simple_tag
def figure_csv(study, name: str, label: str = "Download CSV") -> str:
    """The link to the CSV of the dashboard figure ``name`` (``core.exports`` figures)."""
    from django.urls import reverse

    return format_html('<p class="csv"><a href="{}" download data-testid="csv-{}">{}</a></p>',
                       reverse("figure-csv", args=[study.pk, name]), name, label)
