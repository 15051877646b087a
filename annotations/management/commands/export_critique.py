"""``manage.py export_critique``: Django finds commands here; the command is the critique study
type's
(``annotations/critique/commands/export_critique.py``)."""

from annotations.critique.commands.export_critique import Command

__all__ = ["Command"]
