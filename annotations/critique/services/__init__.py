"""Recursive critique studies (METHODS.md M3; models in ``annotations.critique.models``).

Modules: ``studies`` (create, settings, open/close), ``questions`` (question import),
``generation`` (tasks level by level as their inputs exist), ``assignment`` (the task-engine
kind, the level rule, leasing), ``answers`` (an annotator's output), ``task_view`` (what a
task page shows), ``ai_outputs`` (JSONL import of AI outputs), ``ai_runs`` (outputs from an
OpenAI-compatible endpoint), ``analysis`` (records → estimators.critique → snapshot),
``exports`` (CSV/JSONL), ``simulation`` (simulated annotators through these services) and
``demo`` (the seeded demo studies).
"""
