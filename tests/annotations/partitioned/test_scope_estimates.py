"""Estimates of several scopes (bands, cuts, strata) from one vectorised call equal each
scope's own call, cell by cell, for every method and field."""

import numpy as np
import pytest

from annotations.partitioned.services.scope_estimates import (
    _estimates_for,
    estimates_for_scopes,
)


def _scope(rng, systems: int) -> dict[str, np.ndarray]:
    n_ord = rng.integers(0, 400, systems).astype(float)
    n_comp = rng.integers(0, 1200, systems).astype(float)
    n_ord[0], n_comp[1] = 0, 0  # a system without ordinary, one without complementary labels
    accuracy = rng.uniform(0.3, 1.0, systems)
    s_ord = rng.binomial(n_ord.astype(int), accuracy).astype(float)
    s_ord[2] = n_ord[2]  # a perfect score
    q = (accuracy + 2) / 3
    s_comp = rng.binomial(n_comp.astype(int), q).astype(float)
    return {"n_ord": n_ord, "s_ord": s_ord, "n_comp": n_comp, "s_comp": s_comp}


# (the randomised modes draw fresh tie-breaks on every call, however it is split)
@pytest.mark.parametrize("interval", ["auto", "conservative", "asymptotic"])
def test_one_call_over_the_scopes_equals_a_call_per_scope(interval):
    rng = np.random.default_rng(7)
    scopes = [_scope(rng, 6) for _ in range(5)]
    together = estimates_for_scopes(scopes, 4, interval)
    assert len(together) == len(scopes)
    for stats, joint in zip(scopes, together, strict=True):
        alone = _estimates_for(stats, 4, interval)
        assert joint.keys() == alone.keys()
        for method, fields in alone.items():
            for field, values in fields.items():
                assert joint[method][field] == values, (method, field)


def test_no_scopes_no_estimates():
    assert estimates_for_scopes([], 4, "auto") == []
