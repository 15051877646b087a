"""``manage.py import_critique``: Django finds commands here; the command is the critique study
type's
(``annotations/critique/commands/import_critique.py``)."""

from annotations.critique.commands.import_critique import Command

__all__ = ["Command"]
