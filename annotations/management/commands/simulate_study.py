"""``manage.py simulate_study``: Django finds commands here; the command is the partitioned study
type's
(``annotations/partitioned/commands/simulate_study.py``)."""

from annotations.partitioned.commands.simulate_study import Command

__all__ = ["Command"]
