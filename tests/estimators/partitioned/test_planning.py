"""Planning with several queries per item: the protocol's per-item information and design
effect against simulated routing, and planned study sizes against the spread of the ML
estimate in simulated studies of that size (not against the formulas themselves)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from estimators.partitioned.clustered import design_effects
from estimators.partitioned.likelihood import ml_accuracy
from estimators.partitioned.planning import (
    complementary_labels_for_width,
    labels_needed,
    plan_labels,
    routing_information,
)
from estimators.partitioned.simulation import simulate_routed_items

Z = stats.norm.ppf(0.975)


@pytest.mark.parametrize(("k", "queries", "accuracy"),
                         [(3, 2, 0.3), (4, 4, 0.7), (10, 5, 0.9), (10, 10, 0.97)])
def test_routing_information_matches_simulated_routing(k, queries, accuracy):
    item = routing_information(accuracy, k, queries)
    c = simulate_routed_items(np.random.default_rng(k + queries), 50, 4000, accuracy, k,
                              queries)
    assert item.ordinary == pytest.approx(c.n_ord.mean(), abs=0.01)
    assert item.complementary == pytest.approx(c.n_comp.mean(), rel=0.01)
    # the expected sandwich ratio is the mean of the studies' estimated design effects
    d = design_effects(c, k).joint
    assert item.design_effect == pytest.approx(d.mean(), rel=0.01)
    assert routing_information(accuracy, k, 1).design_effect == pytest.approx(1.0)


def _width(k: int, queries: int, accuracy: float, n_items: int, seed: int) -> float:
    """Full width 2 z SD of the ML estimate across 3 000 simulated studies of n_items."""
    c = simulate_routed_items(np.random.default_rng(seed), 3000, n_items, accuracy, k,
                              queries)
    return 2 * Z * float(np.std(ml_accuracy(*c.totals(), k), ddof=1))


@pytest.mark.parametrize(("k", "queries", "accuracy"), [(4, 4, 0.7), (10, 10, 0.9)])
def test_planned_items_reach_the_target_width(k, queries, accuracy):
    """plan_labels with several queries per item: studies of the planned size have the
    target width (within 4 %: the SD of 3 000 replicates is known to ~1.3 %); planned in raw
    counts (the same information per item without the design effect) the interval comes
    out ~√d wider."""
    target = 0.05
    plan = plan_labels(target, accuracy, k, queries_per_item=queries)
    assert plan.design_effect > 1.3
    assert plan.routed_queries == pytest.approx(
        plan.items * routing_information(accuracy, k, queries).queries, abs=1)
    assert _width(k, queries, accuracy, int(plan.items), seed=1) == pytest.approx(target,
                                                                                  rel=0.04)
    raw = int(plan.items / plan.design_effect)
    assert _width(k, queries, accuracy, raw, seed=2) > 1.1 * target


def test_labels_to_target_in_effective_counts_reach_the_width():
    """From a pilot of 300 items (K = 4, 4 queries per item, A = 0.7): the further "no"
    answers the dashboard asks for (with the "yes" answers of their items, in effective
    counts) give studies of the target width; counted as independent labels (d = 1) they
    leave it ~√d wider."""
    k, queries, a, target = 4, 4, 0.7, 0.05
    pilot = simulate_routed_items(np.random.default_rng(5), 1, 300, a, k, queries)
    n_o, s_o, n_c, s_c = (float(x[0]) for x in pilot.totals())
    a_hat = float(ml_accuracy(n_o, s_o, n_c, s_c, k))
    d = float(design_effects(pilot, k).joint[0])
    assert d > 1.3

    def items_after(design_effect: float) -> int:
        more = complementary_labels_for_width(target, a_hat, k, n_o, n_c, design_effect=d
                                              if design_effect != 1 else 1.0,
                                              ordinary_per_complementary=n_o / n_c)
        return int(round(300 * (n_c + more) / n_c))  # items routed at the pilot's mix

    width = _width(k, queries, a, items_after(d), seed=6)
    assert width == pytest.approx(target, rel=0.06)  # the pilot's Â and d̂ are estimates
    assert _width(k, queries, a, items_after(1.0), seed=7) > 1.15 * target


def test_planning_reduces_to_one_query_per_item():
    plan = plan_labels(0.05, 0.8, 5)
    assert plan.items == plan.routed_queries and plan.design_effect == 1.0
    assert plan_labels(0.05, 0.8, 5, queries_per_item=1) == plan
    assert labels_needed(100, 0.5, 5, design_effect=1.5) == pytest.approx(1.5 * 700)
    base = complementary_labels_for_width(0.05, 0.8, 5, n_ord=10, n_comp=40)
    assert complementary_labels_for_width(0.05, 0.8, 5, n_ord=10, n_comp=40,
                                          design_effect=1.0) == base
