"""Every write of audits: rubrics, runs, the human verifier, uploads and exports."""
