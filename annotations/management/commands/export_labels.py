"""``manage.py export_labels``: Django finds commands here; the command is the partitioned study
type's
(``annotations/partitioned/commands/export_labels.py``)."""

from annotations.partitioned.commands.export_labels import Command

__all__ = ["Command"]
