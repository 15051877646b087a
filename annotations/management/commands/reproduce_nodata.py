"""``manage.py reproduce_nodata``: Django finds commands here; the command is the audit
package's (``annotations/audit/commands/reproduce_nodata.py``)."""

from annotations.audit.commands.reproduce_nodata import Command

__all__ = ["Command"]
