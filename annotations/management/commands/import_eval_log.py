"""``manage.py import_eval_log``: Django finds commands here; the command is the core's
(``annotations/core/import_eval_log.py``)."""

from annotations.core.import_eval_log import Command

__all__ = ["Command"]
