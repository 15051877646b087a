"""Evaluator audits (issue 19; METHODS.md M4): the No-Data Algorithm run against an evaluator
of a study — a study-level object beside the study types, on ``annotations.core`` and
``estimators.nodata`` only (docs/audit.md)."""
