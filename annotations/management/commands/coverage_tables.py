"""``manage.py coverage_tables``: Django finds commands here; the command is the core's
(``annotations/core/coverage_tables.py``)."""

from annotations.core.coverage_tables import Command

__all__ = ["Command"]
