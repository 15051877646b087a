"""Coverage of the design-based estimate's intervals (estimators.partitioned.coverage_design):
a fast subset of the docs/coverage.md grid, simulated with known truth."""

import numpy as np

from estimators.partitioned import coverage_design as cd


def test_default_interval_keeps_the_floor_on_a_few_cells():
    """2 000 studies per cell (Monte-Carlo SE 0.5 points): the default interval covers at
    least 93.5 % for routed systems and the newcomer, uniform and targeted (ε = 0.05 at
    K = 10: weights up to 200), depth 1 and 2; Wald on the SE does not."""
    cells = cd.grid_cells(cd.fast_grid(), 2000, seed=7)
    assert len(cells) == 6
    default = np.array([c.coverage[cd.DEFAULT] for c in cells])
    assert (default >= cd.GOAL_FLOOR).all(), default
    assert min(c.coverage["wald"] for c in cells) < cd.GOAL_FLOOR
    text = cd.markdown(cells, 2000)
    assert text.startswith(cd.HEADING)
    assert text.count("\n| 10 | ε 0.05 | 100 |") == 2
