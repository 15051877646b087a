"""Database guard: an item never moves to another study (its queries, predictions and
masks belong to the study it was imported into)."""

from django.db import migrations

MESSAGE = "an item cannot move to another study"

FORWARD = {
    "postgresql": [
        f"""
        CREATE FUNCTION item_study_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
        END $$;
        """,
        """
        CREATE TRIGGER item_study_fixed BEFORE UPDATE OF study_id ON annotations_item
        FOR EACH ROW WHEN (OLD.study_id IS DISTINCT FROM NEW.study_id)
        EXECUTE FUNCTION item_study_fixed();
        """,
    ],
    "sqlite": [
        f"""
        CREATE TRIGGER item_study_fixed BEFORE UPDATE OF study_id ON annotations_item
        FOR EACH ROW WHEN OLD.study_id IS NOT NEW.study_id
        BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END
        """,
    ],
}
BACKWARD = {
    "postgresql": ["DROP TRIGGER IF EXISTS item_study_fixed ON annotations_item",
                   "DROP FUNCTION IF EXISTS item_study_fixed()"],
    "sqlite": ["DROP TRIGGER IF EXISTS item_study_fixed"],
}


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):

    dependencies = [("annotations", "0007_specialist_flow")]

    operations = [migrations.RunPython(_run(FORWARD), _run(BACKWARD))]
