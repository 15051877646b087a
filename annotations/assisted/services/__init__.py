"""Assisted oversight studies (METHODS M2): the services of the study type.

Modules: ``design`` (create a study, its settings and arms, open it; the tutorial and
quiz defaults), ``imports`` (sentences from CSV/JSONL, traces from JSONL), ``ai`` (the AI
rating from trace samples; sampling an OpenAI-compatible endpoint), ``routing`` (live
routing by AI confidence and the rating tasks it creates), ``raters`` (arm assignment,
tutorial, quiz), ``rating`` (the task engine's RATING kind: lease, heartbeat, skip,
answer), ``exposure`` (what was shown and what the rater did with it), ``selectors``
(reads for the pages and the API).
"""
