"""The admin's pages, gathered where Django's autodiscovery looks (``<app>.admin``): each
study type registers its own in ``annotations/<type>/admin.py``."""

from annotations.assisted import admin as assisted_admin
from annotations.audit import admin as audit_admin
from annotations.core.recruitment import admin as recruitment_admin
from annotations.critique import admin as critique_admin
from annotations.evaluation import admin as evaluation_admin
from annotations.partitioned import admin as partitioned_admin
from annotations.webhooks import admin as webhooks_admin

__all__ = ["assisted_admin", "audit_admin", "critique_admin", "evaluation_admin",
           "partitioned_admin", "recruitment_admin", "webhooks_admin"]
