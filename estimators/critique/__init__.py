"""Recursive critique (METHODS.md M3; paper 002): the study's records, its chain structure,
the effort-matched and naive voting baselines, and the level tables with intervals
clustered by question and annotator. Pure numpy/scipy.

    study = CritiqueStudy.from_records(questions, outputs)   # records.py (checks them)
    report = critique_report(study, seed=study_seed)          # report.py (Tables 1–3, 5)
    votes = effort_matched_votes(study, seed=study_seed)      # votes.py (ids of every vote)

Modules: ``records`` (data model and validation), ``tree`` (parents, sibling groups,
ancestor pairs), ``votes`` (effort, majority with seeded ties, the two baselines),
``report`` (the tables), ``influence`` (what each annotator contributes to a figure),
``coverage`` (the intervals' coverage against exact truth: ``python -m
estimators.critique.coverage``); intervals (Wilson / t / Newcombe clustered by question
and annotator) from ``estimators.numerics.crossed``.
"""

from estimators.critique.records import CritiqueStudy, OutputRecord, QuestionRecord
from estimators.critique.report import (
    INPUT_KINDS,
    MIN_RELIABLE_ANNOTATORS,
    CritiqueReport,
    HumanAiRow,
    InputPairRow,
    LevelRow,
    MajorityCell,
    NaiveCell,
    critique_report,
)
from estimators.critique.votes import (
    Votes,
    effort,
    effort_matched_votes,
    majority,
    naive_votes,
    voters,
)
from estimators.numerics.clustered import (
    Interval,
    clustered_difference,
    clustered_mean,
    clustered_proportion,
)

__all__ = [
    "INPUT_KINDS",
    "MIN_RELIABLE_ANNOTATORS",
    "CritiqueReport",
    "CritiqueStudy",
    "HumanAiRow",
    "InputPairRow",
    "Interval",
    "LevelRow",
    "MajorityCell",
    "NaiveCell",
    "OutputRecord",
    "QuestionRecord",
    "Votes",
    "clustered_difference",
    "clustered_mean",
    "clustered_proportion",
    "critique_report",
    "effort",
    "effort_matched_votes",
    "majority",
    "naive_votes",
    "voters",
]
