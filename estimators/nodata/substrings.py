"""Relevant substrings S_x (paper 004, Sections 4 and 6.1.1, Challenge 1).

Challenge 1 asks: for every relevant substring s of x, is there a relevant substring t of x′
that every criterion of the total rubric values alike (``∀s∈S_x ∃t∈S_x′ ∀c∈C̄: c(s) = c(t)``)?
What counts as relevant is part of the setup. The published code uses the whole datapoint
(S_x = {x}); Challenge 1 then reduces to ``C̄(x) = C̄(x′)``, the total evaluation. That is
the default here (``whole``); ``windows(k)`` gives every contiguous substring of length k
(the whole string when it is shorter), for setups whose criteria look at local structure.

A relevant-substring function maps a datapoint to a non-empty tuple of datapoints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SubstringFn = Callable[[Any], tuple[Any, ...]]


def whole(x: Any) -> tuple[Any, ...]:
    """S_x = {x}: the datapoint itself (the published code's surrogate)."""
    return (x,)


def windows(k: int) -> SubstringFn:
    """S_x = every contiguous length-k substring of a string x (x itself if shorter)."""
    if k < 1:
        raise ValueError(f"k: a window needs at least one character, got {k}")

    def fn(x: str) -> tuple[str, ...]:
        if len(x) <= k:
            return (x,)
        return tuple(x[i:i + k] for i in range(len(x) - k + 1))

    fn.__name__ = f"windows_{k}"
    return fn
