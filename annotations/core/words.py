"""Number words, in one place: "1 minute", "2 minutes", "1 query", "3 queries" — the site's
messages count through :func:`counted` (templates through Django's ``pluralize``)."""

from __future__ import annotations

# Plurals the rule below gets wrong.
IRREGULAR = {"critique of critiques": "critiques of critiques", "person": "people"}


def plural(noun: str, n: float) -> str:
    """``noun`` as ``n`` of it is said: singular for exactly 1, else its plural (a final
    consonant + y → ies; s, x, ch, sh → es; else + s)."""
    if n == 1:
        return noun
    if noun in IRREGULAR:
        return IRREGULAR[noun]
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def counted(n: float, noun: str, *, thousands: bool = False) -> str:
    """"1 minute", "2 minutes", "0 queries"; ``thousands``: "1,200 items"."""
    return f"{n:,} {plural(noun, n)}" if thousands else f"{n} {plural(noun, n)}"
