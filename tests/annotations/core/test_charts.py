"""The dashboards' SVG charts: an axis label names the value at its tick."""

import pytest

from annotations.core.charts import bar_chart, xy_chart


def _label_error(ticks, key, left, right, lo, hi, invert=False):
    """Largest distance (in the axis's units) between a tick's label and its position."""
    worst = 0.0
    for t in ticks:
        frac = (float(t[key]) - left) / (right - left)
        at = lo + (1 - frac if invert else frac) * (hi - lo)
        worst = max(worst, abs(float(t["label"]) - at))
    return worst


@pytest.mark.parametrize("x_range", [(0.0, 1.0), (0.3, 1.0), (0.55, 1.0)])
def test_an_xy_charts_tick_labels_name_their_values(x_range):
    chart = xy_chart([{"name": "a", "color": "#000", "points": [{"x": 0.6, "y": 0.5}]}],
                     x_label="x", y_label="y", x_range=x_range)
    assert _label_error(chart["xticks"], "x", chart["left"], chart["right"], *x_range) < 0.006
    assert _label_error(chart["yticks"], "y", chart["top"], chart["bottom"], 0.0, 1.0,
                        invert=True) < 0.006


def test_a_bar_charts_quarter_ticks_are_not_rounded_to_tenths():
    """0.25 and 0.75 were labelled "0.2" and "0.8" (one decimal)."""
    chart = bar_chart([{"name": "arm", "bars": [{"value": 0.7, "color": "#000"}]}],
                      legend=[], x_label="accuracy")
    assert [t["label"] for t in chart["ticks"]] == ["0.00", "0.25", "0.50", "0.75", "1.00"]
    assert _label_error(chart["ticks"], "x", chart["left"], chart["right"], 0.0, 1.0) < 0.006
