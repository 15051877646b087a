"""The No-Data Algorithm: may we trust an evaluator without references? (METHODS.md M4).

de Wynter, "Labelling Data with Unknown References" (paper 004). Modules, by what they hold:
``criteria`` (a datapoint → 0/1), ``rubrics`` (ordered criteria, total rubrics),
``aggregators`` (σ: majority vote with the paper's tie rule, any-of, all-of), ``substrings``
(relevant substrings for challenge 1), ``protocol`` (the EV protocol, the Evaluator and Verifier
interfaces), ``verifiers`` (programmatic), ``evaluators`` (scikit-learn model, imported
commitments; generation strategies), ``commitments`` (the JSONL reader), ``algorithm`` (the
No-Data Algorithm, Theorem 1), ``synthetic`` (the paper's data and setup) and ``reproduce``
(``python -m estimators.nodata.reproduce --json PATH``). Guide: docs/nodata.md.
"""
