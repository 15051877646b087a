"""The evaluation service's pure side (issue 20; docs/evaluation-service.md): the Ladder's
release rule (``ladder``) and the simulated adaptive attackers it is measured against
(``attacks``). numpy only; the service in ``annotations.evaluation`` applies them."""
