"""Server-side SVG geometry for the dashboard (no chart library: the page works offline)."""

from __future__ import annotations

from dataclasses import dataclass

METHOD_STYLE = {
    "ord": ("Ordinary", "#2f6fb0"),
    "comp": ("Complementary", "#c0572b"),
    "ivw": ("IVW", "#6a3fa0"),
    "ml": ("Maximum likelihood", "#1f8a4c"),
}
PALETTE = ["#1f8a4c", "#2f6fb0", "#c0572b", "#6a3fa0", "#b08a1f", "#2a9d9d", "#a63d6b",
           "#555555"]


@dataclass(frozen=True)
class IntervalMark:
    method: str
    label: str
    color: str
    y: float
    x: float | None
    x_low: float | None
    x_high: float | None


def _x(value: float | None, left: float, width: float) -> float | None:
    if value is None:
        return None
    return left + max(0.0, min(1.0, value)) * width


def interval_chart(systems: list[dict], *, width: int = 640, left: int = 170,
                   row_height: int = 64) -> dict:
    """Rows of point estimates with 95 % intervals for each method, and the reference
    (gold-subset) accuracy as a tick where known."""
    plot_w = width - left - 20
    rows = []
    for i, system in enumerate(systems):
        top = 20 + i * row_height
        marks = []
        for j, (method, (label, color)) in enumerate(METHOD_STYLE.items()):
            est = system["estimates"].get(method, {})
            acc = est.get("accuracy_clipped", est.get("accuracy"))
            marks.append(IntervalMark(
                method=method, label=label, color=color, y=top + 10 + j * 12,
                x=_x(acc, left, plot_w), x_low=_x(est.get("ci_low"), left, plot_w),
                x_high=_x(est.get("ci_high"), left, plot_w),
            ))
        ref = system.get("reference", {}).get("accuracy")
        rows.append({"name": system["name"], "label_y": top + 30, "marks": marks,
                     "ref_x": _x(ref, left, plot_w), "top": top, "bottom": top + row_height - 8})
    height = 30 + len(systems) * row_height
    ticks = [{"x": left + t / 10 * plot_w, "label": f"{t / 10:.1f}"} for t in range(0, 11, 2)]
    return {"width": width, "height": height, "left": left, "right": left + plot_w,
            "rows": rows, "ticks": ticks, "axis_y": height - 8,
            "legend": [{"label": lab, "color": col} for lab, col in METHOD_STYLE.values()]}


def convergence_chart(history: list[tuple[int, list[dict]]], *, width: int = 640,
                      height: int = 220) -> dict | None:
    """ML estimate of each system against the number of answered queries, one line each."""
    points = [(n, systems) for n, systems in history if systems]
    if len(points) < 2:
        return None
    left, right, top, bottom = 50, width - 20, 15, height - 30
    max_n = max(n for n, _ in points) or 1
    names: list[str] = []
    for _, systems in points:
        for s in systems:
            if s["name"] not in names:
                names.append(s["name"])
    lines = []
    for idx, name in enumerate(names):
        coords = []
        for n, systems in points:
            est = next((s["estimates"]["ml"] for s in systems if s["name"] == name), None)
            if est and est.get("accuracy") is not None:
                x = left + n / max_n * (right - left)
                y = bottom - max(0.0, min(1.0, est["accuracy"])) * (bottom - top)
                coords.append(f"{x:.1f},{y:.1f}")
        lines.append({"name": name, "color": PALETTE[idx % len(PALETTE)],
                      "points": " ".join(coords)})
    yticks = [{"y": bottom - t / 4 * (bottom - top), "label": f"{t / 4:.2f}"} for t in range(5)]
    return {"width": width, "height": height, "left": left, "right": right, "top": top,
            "bottom": bottom, "lines": lines, "yticks": yticks, "max_n": max_n}
