"""``manage.py evaluation_example``: Django finds commands here; the command is the
evaluation package's (``annotations/evaluation/commands/evaluation_example.py``)."""

from annotations.evaluation.commands.evaluation_example import Command

__all__ = ["Command"]
