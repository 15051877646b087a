"""The automated accessibility check of the browser tests: axe-core (vendored from the npm
registry, ``vendor/axe-core``) run in the page under test, reporting the violations of the
impacts asked for (serious and critical by default) with the elements they concern."""

from __future__ import annotations

from pathlib import Path

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
# the WCAG 2.x A and AA rules and axe's best practices
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]


def axe_ready(page) -> None:
    """Make axe-core available in every page ``page`` opens from now on (an init script is
    injected by the browser itself: the site's Content-Security-Policy does not apply)."""
    page.add_init_script(path=str(AXE))


def axe_violations(page, impacts: tuple[str, ...] = ("serious", "critical")) -> list[str]:
    """The page's violations of those impacts, one line each: rule, impact, what it asks,
    and up to five of the elements concerned (their CSS selectors)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    result = page.evaluate(
        "(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags}, "
        "resultTypes: ['violations']})", TAGS)
    return [f"{v['id']} ({v['impact']}): {v['help']} — "
            + ", ".join(" ".join(n["target"]) for n in v["nodes"][:5])
            for v in result["violations"] if v["impact"] in impacts]
