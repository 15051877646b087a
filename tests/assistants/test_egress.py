"""The allow-list setting of AI endpoints checked at start (assistants/apps.py, on
``assistants.egress.allow_list_errors``); the egress rules themselves: tests/security."""

from __future__ import annotations


def test_a_typo_in_the_ai_hosts_stops_the_server_at_its_checks(settings):
    from assistants.apps import egress_settings_check

    settings.OVERSIGHT_AI_ALLOWED_HOSTS = ["models.example.org", "10.0.0.0/33"]
    [error] = egress_settings_check()
    assert error.id == "oversight.E001" and "'10.0.0.0/33'" in error.msg
    assert "OVERSIGHT_AI_ALLOWED_HOSTS" in error.msg
    settings.OVERSIGHT_AI_ALLOWED_HOSTS = ["models.example.org"]
    assert egress_settings_check() == []
