"""The evaluation service's pure side (issue 20; docs/evaluation-service.md): the Ladder's
release rule (``ladder``), the simulated adaptive attackers it is measured against
(``attacks``) and the docs' boosting tables over seeds (``protection``). numpy only; the
service in ``annotations.evaluation`` applies them."""
