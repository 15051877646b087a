"""Each ``TallyEntry`` names its query's item, and ``TallyState`` keeps the clustered
variance's sums (``moments``): the triggers of migration 0036 are re-created writing
``item_id`` (PostgreSQL: their functions replaced; SQLite: the triggers dropped and made
again)."""

import importlib

from django.db import migrations, models

triggers = importlib.import_module("annotations.migrations.0036_tally_triggers")


def _recreate(item: bool):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            statements = [s for s in triggers.postgresql_statements(item)
                          if s.startswith("CREATE OR REPLACE FUNCTION")]
        else:
            for name in triggers.SQLITE_TRIGGERS:
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")
            statements = triggers.sqlite_statements(item)
        for statement in statements:
            schema_editor.execute(statement)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ("annotations", "0036_tally_triggers"),
    ]

    operations = [
        migrations.AddField(
            model_name="tallyentry",
            name="item_id",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="tallystate",
            name="moments",
            field=models.BinaryField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(_recreate(True), _recreate(False), elidable=False),
    ]
