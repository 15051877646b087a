"""Signals of assisted studies, for the analysis to listen to (it lives elsewhere)."""

from django.dispatch import Signal

# Sent after a rating commits: ``study_id``, ``rating_id``. The assisted analysis schedules
# its recompute from here (the reliance chart updates live).
rating_recorded = Signal()
