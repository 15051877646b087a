"""Look-alike user names: ``аdmin`` (a Cyrillic а) beside ``admin`` is refused wherever an
account is created or renamed (the Members page, its pasted list, the admin).

``username_key`` is the name as a reader sees it: NFKC (fullwidth ``ａｄｍｉｎ`` and ligatures
become their plain letters), then the confusables *skeleton* of Unicode TR39 §4 — each
character replaced by its prototype — for the scripts people mistake for Latin (Cyrillic,
Greek, a few Latin look-alikes and digits), then case-folded (user names are already unique
without regard to case). Two names with one key are one name to a reader.

The table is a subset of Unicode's confusables.txt (the prototypes of the letters of those
scripts that look Latin, in both cases), not the whole file: no well-kept PyPI package gives
the TR39 skeleton without ICU (PyICU builds against the C library; ``confusable_homoglyphs``
tells mixed scripts, not a skeleton). A name in another script keeps its letters and is
compared as itself. ``I`` is not mapped to ``l`` as TR39 does: after case-folding ``I`` is
``i``, and the mapping would part ``ADMIN`` from ``admin``.
"""

from __future__ import annotations

import unicodedata

# prototype (Latin) ← look-alikes; from Unicode's confusables.txt (TR39), letters that look
# Latin in Cyrillic and Greek, and Latin letters and signs that look like other Latin letters
_LOOK_ALIKES = {
    "A": "АΑᎪＡ", "B": "ВΒᏴ", "C": "СϹᏟ", "E": "ЕΕᎬ", "H": "НΗᎻ", "I": "ІΙӀ", "J": "ЈᎫ",
    "K": "КΚᏦ", "M": "МΜᎷ", "N": "Ν", "O": "ОΟ0", "P": "РΡᏢ", "S": "ЅᏚ", "T": "ТΤᎢ",
    "X": "ХΧ", "Y": "ҮΥ", "Z": "ΖᏃ",
    "a": "аɑα", "c": "сϲ", "d": "ԁ", "e": "е", "g": "ɡ", "h": "һ", "i": "іιı", "j": "јϳȷ",
    "l": "1|ӏ", "o": "оοσ", "p": "рρ", "q": "ԛ", "s": "ѕ", "v": "νѵ", "w": "ԝѡ", "x": "х",
    "y": "уү", "rn": "m",
}
_PROTOTYPE = {ord(c): proto for proto, chars in _LOOK_ALIKES.items() for c in chars}


def username_key(name: str) -> str:
    """The name as a reader sees it (NFKC, TR39 skeleton of the look-alike scripts,
    case-folded): equal keys are names a person cannot tell apart."""
    text = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name.strip()))
    # mapped again after case-folding: ``M`` folds to ``m``, whose prototype is ``rn``
    folded = text.translate(_PROTOTYPE).casefold().translate(_PROTOTYPE)
    return unicodedata.normalize("NFD", folded)
