"""Server-side SVG geometry for the dashboard (no chart library: the page works offline)."""

from __future__ import annotations

from dataclasses import dataclass

from annotations.core.words import counted

METHOD_STYLE = {
    "ord": ("Ordinary", "#2f6fb0"),
    "comp": ("Complementary", "#c0572b"),
    "ivw": ("IVW", "#6a3fa0"),
    "ml": ("Maximum likelihood", "#1f8a4c"),
}
PALETTE = ["#1f8a4c", "#2f6fb0", "#c0572b", "#6a3fa0", "#b08a1f", "#2a9d9d", "#a63d6b",
           "#555555"]


# Lines of the convergence chart are AI systems: colours no method uses in the other chart,
# so each colour means one thing on the page.
SYSTEM_PALETTE = ["#b08a1f", "#2a9d9d", "#a63d6b", "#555555", "#7a5c2e", "#3d6ba6",
                  "#8f4fb0", "#4f7d3a"]


@dataclass(frozen=True)
class IntervalMark:
    method: str
    label: str
    color: str
    y: float
    x: float | None
    x_low: float | None
    x_high: float | None
    title: str


def _x(value: float | None, left: float, width: float) -> float | None:
    if value is None:
        return None
    return left + max(0.0, min(1.0, value)) * width


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def interval_chart(systems: list[dict], *, width: int = 480, margin: int = 16,
                   row_height: int = 84) -> dict:
    """Rows of point estimates with 95 % intervals, one colour per method, and the
    reference (gold-subset) accuracy as a dashed tick where known. Each system's name sits
    above its row so the plot keeps the full width on a phone (the SVG scales to the
    screen; text sizes are set in these units). An estimate of None is not drawn."""
    plot_w = width - 2 * margin
    rows = []
    for i, system in enumerate(systems):
        top = 10 + i * row_height
        marks = []
        for j, (method, (label, color)) in enumerate(METHOD_STYLE.items()):
            est = (system.get("estimates") or {}).get(method) or {}
            acc = est.get("accuracy_clipped", est.get("accuracy"))
            title = (f"{system['name']} · {label}: {_fmt(est.get('accuracy'))} "
                     f"[{_fmt(est.get('ci_low'))}, {_fmt(est.get('ci_high'))}]"
                     if acc is not None else f"{system['name']} · {label}: no data")
            marks.append(IntervalMark(
                method=method, label=label, color=color, y=top + 30 + j * 13,
                x=_x(acc, margin, plot_w), x_low=_x(est.get("ci_low"), margin, plot_w),
                x_high=_x(est.get("ci_high"), margin, plot_w), title=title,
            ))
        ref = (system.get("reference") or {}).get("accuracy")
        rows.append({"name": system["name"], "label_y": top + 14, "marks": marks,
                     "ref_x": _x(ref, margin, plot_w),
                     "ref_title": f"{system['name']} · gold subset: {_fmt(ref)}",
                     "top": top + 20, "bottom": top + row_height - 10})
    axis_y = 10 + len(systems) * row_height
    height = axis_y + 22
    ticks = [{"x": margin + t / 10 * plot_w, "label": f"{t / 10:.1f}"} for t in range(0, 11, 2)]
    return {"width": width, "height": height, "left": margin, "right": margin + plot_w,
            "rows": rows, "ticks": ticks, "axis_y": axis_y,
            "legend": [{"label": lab, "color": col} for lab, col in METHOD_STYLE.values()]}


def convergence_chart(history: list[tuple[int, list[dict]]], *, width: int = 480,
                      height: int = 240) -> dict | None:
    """ML estimate of each system against the number of answered queries, one line (one
    colour) per system; each point carries its value as a tooltip. No-data points (None)
    are left out."""
    points = [(n, systems) for n, systems in history if systems]
    if len(points) < 2:
        return None
    left, right, top, bottom = 44, width - 12, 12, height - 30
    max_n = max(n for n, _ in points) or 1
    names: list[str] = []
    for _, systems in points:
        for s in systems:
            if s["name"] not in names:
                names.append(s["name"])
    lines = []
    for idx, name in enumerate(names):
        coords, dots = [], []
        for n, systems in points:
            est = next(((s.get("estimates") or {}).get("ml") for s in systems
                        if s["name"] == name), None)
            if est and est.get("accuracy") is not None:
                x = left + n / max_n * (right - left)
                y = bottom - max(0.0, min(1.0, est["accuracy"])) * (bottom - top)
                coords.append(f"{x:.1f},{y:.1f}")
                dots.append({"x": f"{x:.1f}", "y": f"{y:.1f}",
                             "title": f"{name}: {est['accuracy']:.3f} after "
                                      f"{counted(n, 'answer', thousands=True)}"})
        lines.append({"name": name, "color": SYSTEM_PALETTE[idx % len(SYSTEM_PALETTE)],
                      "points": " ".join(coords), "dots": dots})
    yticks = [{"y": bottom - t / 4 * (bottom - top), "label": f"{t / 4:.2f}"} for t in range(5)]
    return {"width": width, "height": height, "left": left, "right": right, "top": top,
            "bottom": bottom, "lines": lines, "yticks": yticks, "max_n": max_n}


def line_chart_svg(series: dict[str, list[tuple[float, float]]], *, title: str, x_label: str,
                   y_label: str, log_y: bool = False, width: int = 640,
                   height: int = 360) -> str:
    """A standalone SVG line chart (one polyline per series, with legend and axes), for
    files written by management commands."""
    from math import log10

    def ty(v: float) -> float:
        return log10(v) if log_y else v

    pts = [(x, y) for line in series.values() for x, y in line if not log_y or y > 0]
    if not pts:
        raise ValueError("line_chart_svg: no points to draw")
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(ty(p[1]) for p in pts), max(ty(p[1]) for p in pts)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    left, right, top, bottom = 70, width - 150, 30, height - 45

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (right - left)

    def sy(y: float) -> float:
        return bottom - (ty(y) - y0) / (y1 - y0) * (bottom - top)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">{title}</text>',
           f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/>',
           f'<text x="{(left + right) / 2}" y="{height - 8}" text-anchor="middle">'
           f'{x_label}</text>',
           f'<text x="14" y="{(top + bottom) / 2}" text-anchor="middle" '
           f'transform="rotate(-90 14 {(top + bottom) / 2})">{y_label}</text>']
    for i in range(5):
        xv = x0 + i / 4 * (x1 - x0)
        out.append(f'<text x="{sx(xv):.1f}" y="{bottom + 14}" text-anchor="middle">'
                   f'{xv:g}</text>')
        yv = y0 + i / 4 * (y1 - y0)
        label = f"{10 ** yv:.2g}" if log_y else f"{yv:.3g}"
        ypix = bottom - i / 4 * (bottom - top)
        out.append(f'<text x="{left - 6}" y="{ypix + 4:.1f}" text-anchor="end">{label}</text>')
        out.append(f'<line x1="{left}" y1="{ypix:.1f}" x2="{right}" y2="{ypix:.1f}" '
                   f'stroke="#ddd"/>')
    for idx, (name, line) in enumerate(series.items()):
        color = PALETTE[idx % len(PALETTE)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in line if not log_y or y > 0)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" '
                   f'points="{coords}"/>')
        ly = top + 14 + idx * 16
        out.append(f'<line x1="{right + 10}" y1="{ly - 4}" x2="{right + 30}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{right + 34}" y="{ly}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    return [lo + i / (n - 1) * (hi - lo) for i in range(n)]


def xy_chart(series: list[dict], *, x_label: str, y_label: str,
             x_range: tuple[float, float] = (0.0, 1.0),
             y_range: tuple[float, float] = (0.0, 1.0), diagonal: bool = False,
             width: int = 480, height: int = 280, x_format: str = "{:.2f}",
             y_format: str = "{:.2f}") -> dict | None:
    """Lines of points with optional vertical interval bars, for the dashboards' curves
    (accuracy against a threshold or a share, a reliability diagram with ``diagonal``).

    ``series``: [{"name", "color", "points": [{"x", "y", "low"?, "high"?, "title"}],
    "dashed"?: bool, "step"?: bool}]; a point with y None is left out (no data), and
    values are clipped to the ranges. Text sizes are in the SVG's units (it scales to the
    screen). None when no series has a point."""
    left, right, top, bottom = 46, width - 12, 12, height - 40
    (x0, x1), (y0, y1) = x_range, y_range
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = y1 if y1 > y0 else y0 + 1

    def sx(v: float) -> float:
        return left + (min(max(v, x0), x1) - x0) / (x1 - x0) * (right - left)

    def sy(v: float) -> float:
        return bottom - (min(max(v, y0), y1) - y0) / (y1 - y0) * (bottom - top)

    lines = []
    for s in series:
        pts = [p for p in s["points"] if p.get("y") is not None and p.get("x") is not None]
        coords, dots, bars = [], [], []
        for i, p in enumerate(pts):
            x, y = sx(p["x"]), sy(p["y"])
            if s.get("step") and i:
                coords.append(f"{x:.1f},{sy(pts[i - 1]['y']):.1f}")
            coords.append(f"{x:.1f},{y:.1f}")
            dots.append({"x": f"{x:.1f}", "y": f"{y:.1f}", "title": p.get("title", "")})
            if p.get("low") is not None and p.get("high") is not None:
                bars.append({"x": f"{x:.1f}", "y1": f"{sy(p['low']):.1f}",
                             "y2": f"{sy(p['high']):.1f}", "title": p.get("title", "")})
        lines.append({"name": s["name"], "color": s["color"], "points": " ".join(coords),
                      "dots": dots, "bars": bars, "dashed": bool(s.get("dashed")),
                      "markers": s.get("markers", True)})
    if not any(line["dots"] for line in lines):
        return None
    return {
        "width": width, "height": height, "left": left, "right": right, "top": top,
        "bottom": bottom, "lines": lines, "x_label": x_label, "y_label": y_label,
        "xticks": [{"x": f"{sx(v):.1f}", "label": x_format.format(v)}
                   for v in _ticks(x0, x1)],
        "yticks": [{"y": f"{sy(v):.1f}", "label": y_format.format(v)}
                   for v in _ticks(y0, y1)],
        "diagonal": ({"x1": sx(max(x0, y0)), "y1": sy(max(x0, y0)), "x2": sx(min(x1, y1)),
                      "y2": sy(min(x1, y1))} if diagonal else None),
    }


def bar_chart(groups: list[dict], *, legend: list[dict], x_label: str,
              x_range: tuple[float, float] = (0.0, 1.0), width: int = 480,
              bar_height: int = 14, x_format: str = "{:.2f}",
              reference: dict | None = None) -> dict | None:
    """Horizontal bars with interval whiskers, in groups (one group per arm, one bar per
    series within it, e.g. "AI right" / "AI wrong"). ``groups``: [{"name", "bars": [{"value",
    "low", "high", "color", "title"}]}]; a value None draws no bar (no data). Group names
    sit above their bars so the plot keeps the full width on a phone. ``reference``: an
    optional dashed vertical line {"value", "title"}."""
    margin = 16
    plot_w = width - 2 * margin

    def sx(v: float) -> float:
        lo, hi = x_range
        return margin + (min(max(v, lo), hi) - lo) / ((hi - lo) or 1) * plot_w

    rows, y = [], 8
    for g in groups:
        label_y = y + 14
        y += 22
        bars = []
        for b in g["bars"]:
            bar = {"y": y, "h": bar_height, "color": b["color"], "title": b.get("title", ""),
                   "mid": y + bar_height / 2, "value": b.get("value")}
            if b.get("value") is not None:
                bar["x"], bar["w"] = margin, max(0.0, sx(b["value"]) - margin)
            if b.get("low") is not None and b.get("high") is not None:
                bar["lo"], bar["hi"] = sx(b["low"]), sx(b["high"])
            bars.append(bar)
            y += bar_height + 4
        rows.append({"name": g["name"], "label_y": label_y, "bars": bars})
        y += 8
    if not rows or not any(b.get("value") is not None for r in rows for b in r["bars"]):
        return None
    axis_y = y
    lo, hi = x_range
    return {"width": width, "height": axis_y + 38, "left": margin, "right": margin + plot_w,
            "axis_y": axis_y, "rows": rows, "legend": legend, "x_label": x_label,
            "ticks": [{"x": f"{sx(v):.1f}", "label": x_format.format(v)}
                      for v in _ticks(lo, hi)],
            "reference": ({"x": sx(reference["value"]), "title": reference.get("title", "")}
                          if reference and reference.get("value") is not None else None)}


def headline(title: str, figures: list[tuple], note: str = "approximate") -> dict | None:
    """The figure a dashboard leads with (``templates/annotations/_headline.html``): one
    value per AI system, arm or level with its 95 % interval, as ``(name, value, low,
    high)`` or ``(name, value, low, high, approximate)``; a value None is "no data", a
    missing bound "no interval yet"; an approximate interval is marked, linking to the
    dashboard's note ``#<note>``. None without figures."""
    if not figures:
        return None
    return {"title": title, "note": note,
            "figures": [{"name": f[0], "value": f[1], "low": f[2], "high": f[3],
                         "approximate": bool(f[4]) if len(f) > 4 else False}
                        for f in figures]}
