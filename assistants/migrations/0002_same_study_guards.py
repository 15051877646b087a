"""Database guards against cross-study rows: a prediction pairs an AI system and an item of
the same study, and an AI system never moves to another study. PostgreSQL checks inserted
and updated predictions once per statement (bulk imports stay fast); SQLite per row."""

from django.db import migrations

MESSAGE = "a prediction pairs an AI system and an item of different studies"

PG_FORWARD = [
    f"""
    CREATE FUNCTION prediction_same_study() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM new_rows n
                   JOIN assistants_aisystem s ON s.id = n.system_id
                   JOIN annotations_item i ON i.id = n.item_id
                   WHERE s.study_id <> i.study_id) THEN
            RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NULL;
    END $$;
    """,
    """
    CREATE TRIGGER prediction_same_study_insert AFTER INSERT ON assistants_prediction
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION prediction_same_study();
    """,
    """
    CREATE TRIGGER prediction_same_study_update AFTER UPDATE ON assistants_prediction
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION prediction_same_study();
    """,
    """
    CREATE FUNCTION aisystem_study_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'an AI system cannot move to another study'
            USING ERRCODE = 'integrity_constraint_violation';
    END $$;
    """,
    """
    CREATE TRIGGER aisystem_study_fixed BEFORE UPDATE OF study_id ON assistants_aisystem
    FOR EACH ROW WHEN (OLD.study_id IS DISTINCT FROM NEW.study_id)
    EXECUTE FUNCTION aisystem_study_fixed();
    """,
]
PG_BACKWARD = [
    "DROP TRIGGER IF EXISTS prediction_same_study_insert ON assistants_prediction",
    "DROP TRIGGER IF EXISTS prediction_same_study_update ON assistants_prediction",
    "DROP FUNCTION IF EXISTS prediction_same_study()",
    "DROP TRIGGER IF EXISTS aisystem_study_fixed ON assistants_aisystem",
    "DROP FUNCTION IF EXISTS aisystem_study_fixed()",
]
_PAIR_DIFFERS = ("(SELECT study_id FROM assistants_aisystem WHERE id = NEW.system_id) IS NOT "
                 "(SELECT study_id FROM annotations_item WHERE id = NEW.item_id)")
SQLITE_FORWARD = [
    f"""
    CREATE TRIGGER prediction_same_study_insert BEFORE INSERT ON assistants_prediction
    FOR EACH ROW WHEN {_PAIR_DIFFERS}
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END
    """,
    f"""
    CREATE TRIGGER prediction_same_study_update
    BEFORE UPDATE OF system_id, item_id ON assistants_prediction
    FOR EACH ROW WHEN {_PAIR_DIFFERS}
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END
    """,
    """
    CREATE TRIGGER aisystem_study_fixed BEFORE UPDATE OF study_id ON assistants_aisystem
    FOR EACH ROW WHEN OLD.study_id IS NOT NEW.study_id
    BEGIN SELECT RAISE(ABORT, 'an AI system cannot move to another study'); END
    """,
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS prediction_same_study_insert",
    "DROP TRIGGER IF EXISTS prediction_same_study_update",
    "DROP TRIGGER IF EXISTS aisystem_study_fixed",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ("assistants", "0001_initial"),
        ("annotations", "0005_interval_method_help"),
    ]

    operations = [
        migrations.RunPython(
            _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        ),
    ]
