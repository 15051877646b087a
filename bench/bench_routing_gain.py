"""The gain of a targeted routing design (issue 28): answered items needed for a ±0.02
interval (half-width of the 95 % interval) under the uniform design with the platform's
default estimator, against the targeted design (ε = 0.2) with the design-based estimate.

    .venv/bin/python bench/bench_routing_gain.py [--reps 200] [--quick]

One query per item (depth 1), so answered items = items. Uniform design: the ML estimate
(``estimators.partitioned.accuracy.estimate(..., method="ml")``) on the counts n_o = "yes"
answers, S_o = "yes" at ŷ, n_c = "no" answers, S_c = "no" answers whose class is not ŷ.
Targeted design: :func:`estimators.partitioned.design_estimate.design_estimate` (its
default interval), for the routed systems and for a newcomer (A = 0.85) added after the
answers. Each mean half-width h(n) is measured by simulation at two sizes n₁ < n₂; the
items needed solve log h = a + b log n for h = 0.02 (b ≈ −½). Truth: the simulation's
(:mod:`estimators.partitioned.routing_simulation`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from estimators.partitioned.accuracy import estimate  # noqa: E402
from estimators.partitioned.design_estimate import YES, design_estimate  # noqa: E402
from estimators.partitioned.routing_simulation import simulate  # noqa: E402

TARGET = 0.02
EPSILON = 0.2
NEWCOMER = 0.85
PANELS = {5: (0.6, 0.75, 0.85, 0.92, 0.97), 20: tuple(np.round(np.linspace(0.6, 0.97, 20), 3))}
SIZES = {4: (1000, 4000), 10: (1000, 4000)}


def uniform_half_width(rng, reps, n, k, accuracies, agree):
    """Mean half-width per system of the uniform design's ML interval."""
    st = simulate(rng, reps, n, k, (*accuracies, NEWCOMER), agree=agree, design="uniform")
    o = st.items["orders"][..., 0]
    yes = st.items["answers"][..., 0] == YES
    pred = st.items["predictions"]
    hit = pred == o[..., None]
    n_o = yes.sum(axis=1)[:, None] * np.ones(pred.shape[-1])
    s_o = (yes[..., None] & hit).sum(axis=1)
    n_c = (~yes).sum(axis=1)[:, None] * np.ones(pred.shape[-1])
    s_c = (~yes[..., None] & ~hit).sum(axis=1)
    est = estimate(n_o, s_o, n_c, s_c, k, method="ml")
    return ((est.ci_high - est.ci_low) / 2).mean(axis=0)


def targeted_half_width(rng, reps, n, k, accuracies, agree):
    routed = range(len(accuracies))
    st = simulate(rng, reps, n, k, (*accuracies, NEWCOMER), agree=agree, design="targeted",
                  epsilon=EPSILON, routed=routed)
    est = design_estimate(st.steps)
    return ((est.ci_high - est.ci_low) / 2).mean(axis=0)


def items_needed(sizes, widths):
    """n with h(n) = TARGET on the log-log line through the two measurements."""
    (n1, n2), (h1, h2) = sizes, widths
    slope = (np.log(h2) - np.log(h1)) / (np.log(n2) - np.log(n1))
    return np.exp(np.log(n1) + (np.log(TARGET) - np.log(h1)) / slope)


def measure(fn, rng, reps, n, k, accs, agree):
    """``fn``'s mean half-widths over ``reps`` studies, in chunks of ≤ ~4e6 item × system
    cells."""
    per = max(1, int(4e6 // (n * (len(accs) + 1))))
    parts, done = [], 0
    while done < reps:
        r = min(per, reps - done)
        parts.append(fn(rng, r, n, k, accs, agree) * r)
        done += r
    return np.sum(parts, axis=0) / reps


def run(reps: int, ks=(4, 10), systems=(5, 20), seed: int = 28):
    rng = np.random.default_rng(seed)
    rows = []
    for k in ks:
        for s in systems:
            for agree in (True, False):
                accs = PANELS[s]
                sizes = SIZES[k]
                uni = [measure(uniform_half_width, rng, reps, n, k, accs, agree)
                       for n in sizes]
                tar = [measure(targeted_half_width, rng, reps, n, k, accs, agree)
                       for n in sizes]
                need_u = items_needed(sizes, uni)
                need_t = items_needed(sizes, tar)
                rows.append((k, s, agree, accs, need_u, need_t))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="K = 4, 5 systems only")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = run(args.reps, ks=(4,) if args.quick else (4, 10),
               systems=(5,) if args.quick else (5, 20))
    print(f"Items for a ±{TARGET} interval (95 %), ε = {EPSILON}, depth 1, "
          f"{args.reps} studies per size:\n")
    print("| K | systems | errors | routed: uniform items (median) | routed: ratio min / "
          "median / max | newcomer: uniform | newcomer: targeted | newcomer ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for k, s, agree, _, need_u, need_t in rows:
        ratio = need_u[:-1] / need_t[:-1]
        print(f"| {k} | {s} | {'agree' if agree else 'disagree'} | "
              f"{np.median(need_u[:-1]):,.0f} | {ratio.min():.2f} / {np.median(ratio):.2f} / "
              f"{ratio.max():.2f} | {need_u[-1]:,.0f} | {need_t[-1]:,.0f} | "
              f"{need_t[-1] / need_u[-1]:.2f}× the uniform's |")
    print("\nPer routed system (K, systems, errors: A → uniform / targeted items):")
    for k, s, agree, accs, need_u, need_t in rows:
        cells = ", ".join(f"{a:g}: {u:,.0f}/{t:,.0f}"
                          for a, u, t in zip(accs, need_u, need_t, strict=False))
        print(f"  K={k} S={s} {'agree' if agree else 'disagree'}: {cells}")
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
