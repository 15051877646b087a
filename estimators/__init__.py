"""Pure numpy/scipy statistics of the platform (no Django import anywhere in this package).

``estimators.partitioned.accuracy.estimate`` is the entry point for partitioned supervision
(METHODS.md M1); ``estimators.partitioned.planning`` answers "how many labels do we still need?".
"""
