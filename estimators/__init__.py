"""Pure numpy/scipy statistics of the platform (no Django import anywhere in this package).

``estimators.partitioned.estimate`` is the entry point for partitioned supervision
(METHODS.md M1); ``estimators.planning`` answers "how many labels do we still need?".
"""
