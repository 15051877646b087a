"""What the evaluation service plugs into the core: its panel on partitioned dashboards (the
submission history of candidates registered as AI systems)."""

from __future__ import annotations


def register() -> None:
    from annotations.core.views import dashboard_panel_register
    from annotations.evaluation.views import dashboard_panel

    dashboard_panel_register(dashboard_panel)
