"""Input checks shared by the estimators: impossible cells raise naming the cell and field."""

from __future__ import annotations

import numpy as np


def _first_bad(mask: np.ndarray) -> str:
    idx = np.argwhere(mask)[0]
    return "cell " + (str(tuple(int(i) for i in idx)) if idx.size else "(scalar)")


def as_counts(**named: object) -> dict[str, np.ndarray]:
    """Broadcast the named count arrays to float arrays and check them.

    Raises ValueError for NaN or negative counts, naming the first offending cell."""
    arrays = dict(zip(named, np.broadcast_arrays(*(np.asarray(v, dtype=float)
                                                    for v in named.values())), strict=True))
    for name, arr in arrays.items():
        bad = ~np.isfinite(arr) | (arr < 0)
        if bad.any():
            raise ValueError(f"{name}: negative or non-finite count at {_first_bad(bad)}")
    return arrays


def check_successes(n: np.ndarray, s: np.ndarray, n_name: str, s_name: str) -> None:
    bad = s > n * (1 + 1e-12) + 1e-9
    if bad.any():
        raise ValueError(f"{s_name} exceeds {n_name} at {_first_bad(bad)}")


def check_k(k: int, n_comp: np.ndarray) -> None:
    if int(k) != k or k < 2:
        raise ValueError(f"k: need at least 2 classes, got {k}")
    if k < 3 and (n_comp > 0).any():
        raise ValueError(f"n_comp: complementary labels need k >= 3 (k = {k}) at "
                         f"{_first_bad(n_comp > 0)}")
