"""Which items' options are shuffled: a rule of the question's wording.

A specialist of class k is asked "Is the answer <name of class k>?" about the option shown
at position k, next to the label <name of class k>. That reads right in two cases only:

* **own options** (multiple choice, classes named by position such as A, B, C, D): the
  option texts differ from every class name, so any order is fine and ``shuffle_options``
  shuffles them per item;
* **named categories** (Cat, Dog, Bird): the item has no options, or its options are exactly
  the class names in class order; position k must stay category k, so they are never
  shuffled whatever ``shuffle_options`` says.

Anything in between (options repeating class names in another order, or only some of them)
would show "Cat: Dog" and ask "Is the answer Cat?" about a dog: refused at import.
"""

from __future__ import annotations

from collections.abc import Sequence


def _key(text: str) -> str:
    return str(text).strip().casefold()


def options_are_class_names(options: Sequence[str], class_names: Sequence[str]) -> bool:
    """True when the item carries no options of its own: none, or the class names in order."""
    return not options or [_key(o) for o in options] == [_key(c) for c in class_names]


def options_conflict(options: Sequence[str], class_names: Sequence[str]) -> str | None:
    """Why these options would mislabel the question (an import error), or None."""
    if options_are_class_names(options, class_names):
        return None
    names = {_key(c): i for i, c in enumerate(class_names)}
    for position, option in enumerate(options):
        k = names.get(_key(option))
        if k is not None:
            return (f"option {position} '{option}' is the name of class {k}, but these options "
                    f"are not the class names in class order; leave options empty for named "
                    f"categories, or name the classes by position (A, B, C …) when items "
                    f"have their own answers")
    return None


def option_order_for(options: Sequence[str], class_names: Sequence[str],
                     drawn: list[int]) -> list[int]:
    """The stored ``option_order`` of a new item: the drawn shuffle for own options, the
    identity for named categories."""
    if options_are_class_names(options, class_names):
        return list(range(len(class_names)))
    return drawn
