from django.apps import AppConfig
from django.core import checks


class AssistantsConfig(AppConfig):
    name = "assistants"
    verbose_name = "AI systems"

    def ready(self) -> None:
        checks.register(egress_settings_check, checks.Tags.security)
        from assistants.audit_evaluator import register

        register()  # an AI system as the evaluator of audits (annotations.audit)


def egress_settings_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """OVERSIGHT_AI_ALLOWED_HOSTS parses (a typo must stop the server, not widen the list)."""
    from assistants.egress import allow_list_errors, policy_from_settings

    return allow_list_errors(policy_from_settings, "oversight.E001", "docs/operations.md")
