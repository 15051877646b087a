"""``manage.py import_items``: Django finds commands here; the command is the partitioned study
type's
(``annotations/partitioned/commands/import_items.py``)."""

from annotations.partitioned.commands.import_items import Command

__all__ = ["Command"]
