"""``manage.py validate_estimators``: Django finds commands here; the command is the partitioned
study type's
(``annotations/partitioned/commands/validate_estimators.py``)."""

from annotations.partitioned.commands.validate_estimators import Command

__all__ = ["Command"]
