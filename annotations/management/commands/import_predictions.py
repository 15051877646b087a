"""``manage.py import_predictions``: Django finds commands here; the command is the partitioned
study type's
(``annotations/partitioned/commands/import_predictions.py``)."""

from annotations.partitioned.commands.import_predictions import Command

__all__ = ["Command"]
