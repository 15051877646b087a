"""Number words, in one place: "1 minute", "2 minutes", "1 query", "3 queries" — the site's
messages count through :func:`counted` (templates through Django's ``pluralize``)."""

from __future__ import annotations

from django.utils.translation import gettext, gettext_noop

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


# A task's noun as a worker's message says it, translated (the engine's messages name the
# task kind's noun: ``engine.TaskKind.noun``): "this query" / "the query" — whole phrases,
# since a language's article depends on the noun.
_THIS = {"query": gettext_noop("this query"), "sentence": gettext_noop("this sentence"),
         "task": gettext_noop("this task"), "question": gettext_noop("this question")}
_THE = {"query": gettext_noop("the query"), "sentence": gettext_noop("the sentence"),
        "task": gettext_noop("the task"), "question": gettext_noop("the question")}


def this_noun(noun: str) -> str:
    """"this query", in the page's language."""
    return gettext(_THIS[noun]) if noun in _THIS else f"this {noun}"


def the_noun(noun: str) -> str:
    """"the query", in the page's language."""
    return gettext(_THE[noun]) if noun in _THE else f"the {noun}"


_STATUS = {"draft": gettext_noop("draft"), "open": gettext_noop("open"),
           "closed": gettext_noop("closed")}


def no_longer_accepted(study, status: str, *, ratings: bool = False) -> str:
    """"Study 'X' is closed; answers are no longer accepted." (a worker's refusal when the
    study closed under them), in the page's language."""
    word = gettext(_STATUS[status]) if status in _STATUS else status
    message = (gettext("Study '%(name)s' is %(status)s; ratings are no longer accepted.")
               if ratings else
               gettext("Study '%(name)s' is %(status)s; answers are no longer accepted."))
    return message % {"name": study, "status": word}
