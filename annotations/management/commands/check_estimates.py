"""``manage.py check_estimates``: Django finds commands here; the command is the partitioned
study type's (``annotations/partitioned/commands/check_estimates.py``)."""

from annotations.partitioned.commands.check_estimates import Command

__all__ = ["Command"]
