"""Signed webhooks: researchers' endpoints told of their studies' notices
(``annotations.core.services.notices``), delivered with retries, a signature and a log."""
