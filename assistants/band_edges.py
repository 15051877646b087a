"""The limits on a study's confidence bands and the validation of a fixed scheme's edges
(pure: no Django, no database), shared by the ``ConfidenceBands`` model's ``clean`` and
``annotations.partitioned.services.predictions.confidence_bands_set``. The band rule itself:
:mod:`annotations.partitioned.services.banding`."""

from __future__ import annotations

import math

MAX_CONFIDENCE_BANDS = 7  # a band index (1..7, 0 = none) is three bits: Query.band_bit0..2


def edges_problem(edges) -> str | None:
    """Why ``edges`` cannot be a fixed scheme's edges (None when they can): they must be a
    non-empty list of at most ``MAX_CONFIDENCE_BANDS`` − 1 numbers (not booleans), finite,
    strictly between 0 and 1 and strictly increasing."""
    if not isinstance(edges, list) or not edges:
        return "give at least one edge, e.g. [0.5, 0.8]"
    if len(edges) > MAX_CONFIDENCE_BANDS - 1:
        return f"at most {MAX_CONFIDENCE_BANDS - 1} edges ({MAX_CONFIDENCE_BANDS} bands)"
    for i, e in enumerate(edges):
        if isinstance(e, bool) or not isinstance(e, int | float) or not math.isfinite(e):
            return f"edge {i + 1} ({e!r}) is not a number"
        if not 0 < e < 1:
            return f"edge {i + 1} ({e}) must lie strictly between 0 and 1"
        if i and e <= edges[i - 1]:
            return f"must increase: {edges[i - 1]} then {e}"
    return None
