"""The README introduces every study type with its pages, its guides and the demo accounts
`serve` seeds (it introduced partitioned supervision only)."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_every_study_type_is_introduced_with_its_labelling_page():
    for name, page in (("Partitioned supervision", "/studies/<id>/label/"),
                       ("Assisted oversight", "/studies/<id>/rate/"),
                       ("Recursive critique", "/studies/<id>/critique/")):
        assert f"**{name}**" in README and f"`{page}`" in README


def test_the_demo_accounts_of_every_type_are_listed():
    for account in ("admin", "manager", "specialist-a", "rater-blind", "rater-assisted",
                    "annotator-l0", "annotator-l3"):
        assert f"`{account}`" in README, account
    assert "No-Data Algorithm" in README and "agent search" in README
    assert "## Two commands" in README


def test_every_guide_the_readme_links_exists():
    root = Path(__file__).resolve().parents[2]
    for link in re.findall(r"\]\((docs/[\w.-]+\.md)\)", README):
        assert (root / link).is_file(), link
