"""The evaluation service (issue 20; docs/evaluation-service.md): an automated design loop
submits a candidate's predictions for a partitioned study's items and gets back its
estimated accuracy from the study's ordinary and complementary labels, behind evaluation
tokens with a minimum batch, a daily budget, the Ladder and a holdout."""
