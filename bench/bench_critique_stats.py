"""Cost of recomputing a recursive-critique study's tables (issue 10 budget: ≤ 1 s for a
1 000-question study with L = 3, i.e. 7 + 5 + 3 + 1 = 16 outputs per question).

    .venv/bin/python bench/bench_critique_stats.py [--questions 1000] [--repeat 7]

The intervals' coverage: ``manage.py coverage_tables critique --levels`` / ``--human-ai``
(docs/coverage.md).

"Recompute" = what the Celery task does after its one query: ``CritiqueStudy.from_records``
on the rows (tuples as ``values_list`` gives them, or dicts as ``values`` gives them) and
``critique_report`` (all tables: levels with effort-matched and naive votes, input pairs,
human–AI), each timed separately and together; median and worst of ``--repeat`` runs in a
warm process (imports done), plus the median CPU time of the whole recompute (on a
shared, busy machine the wall times include waiting for a core). Studies: human-only
(the paper's Tables 1–2), and human–AI (an AI chain of 16 outputs per question plus 7
human outputs: 3 author groups, Table 3); 30 annotators write the human outputs (each
output carries its annotator, as on the platform, so the intervals are clustered by
question and annotator).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from estimators.critique import (  # noqa: E402
    CritiqueStudy,
    critique_report,
)
from estimators.critique.simulation import CritiqueDesign, simulate_critique  # noqa: E402

BUDGET_S = 1.0


def timed(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), max(times)


def cpu(fn, repeat: int) -> float:
    """Median CPU time of this process (less sensitive than wall time to a busy machine)."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def bench(name: str, design: CritiqueDesign, repeat: int) -> float:
    sim = simulate_critique(design, seed=1)
    questions, outputs = sim.records
    as_dicts = [o._asdict() for o in outputs]
    q_dicts = [q._asdict() for q in questions]
    study = sim.study
    critique_report(study, seed=1)  # warm caches of numpy/scipy paths

    def report_only():
        fresh = CritiqueStudy.from_records(questions, outputs)
        t0 = time.perf_counter()
        critique_report(fresh, seed=1)
        return time.perf_counter() - t0

    def recompute():
        critique_report(CritiqueStudy.from_records(questions, outputs), seed=1)

    def recompute_dicts():
        critique_report(CritiqueStudy.from_records(q_dicts, as_dicts), seed=1)

    report_times = sorted(report_only() for _ in range(repeat))
    rec_med, rec_max = timed(lambda: CritiqueStudy.from_records(questions, outputs), repeat)
    all_med, all_max = timed(recompute, repeat)
    dict_med, dict_max = timed(recompute_dicts, repeat)
    all_cpu = cpu(recompute, repeat)
    rows = len(critique_report(study, seed=1).levels)
    print(f"{name}: {design.n_questions} questions, {study.n_outputs} outputs, L = "
          f"{study.top_level}, {rows} level rows")
    print(f"  from_records (tuples)          median {rec_med * 1000:7.1f} ms   worst "
          f"{rec_max * 1000:7.1f} ms")
    print(f"  critique_report                median "
          f"{statistics.median(report_times) * 1000:7.1f} ms   worst "
          f"{report_times[-1] * 1000:7.1f} ms")
    print(f"  recompute, tuples (both)       median {all_med * 1000:7.1f} ms   worst "
          f"{all_max * 1000:7.1f} ms")
    print(f"  recompute, dicts (both)        median {dict_med * 1000:7.1f} ms   worst "
          f"{dict_max * 1000:7.1f} ms")
    print(f"  recompute, tuples, CPU time    median {all_cpu * 1000:7.1f} ms")
    return max(all_max, dict_max)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    worst = bench("human-human", CritiqueDesign(n_questions=args.questions,
                                                domains=("math", "english", "logic",
                                                         "reading", "figures"),
                                                n_annotators=30), args.repeat)
    worst = max(worst, bench("human-AI", CritiqueDesign(
        n_questions=args.questions, mode="human_ai", accuracy=(0.4, 0.55, 0.6, 0.62),
        ai_accuracy=(0.5, 0.52, 0.55, 0.57), human_counts=(3, 2, 1, 1), n_annotators=30),
        args.repeat))
    verdict = "within" if worst <= BUDGET_S else "OVER"
    print(f"worst recompute {worst * 1000:.1f} ms: {verdict} the {BUDGET_S * 1000:.0f} ms "
          "budget")
    return 0 if worst <= BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
