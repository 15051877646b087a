"""Triggers that log a change of an AI system's prediction about an item whose answers a
targeted design's estimate reads (``annotations.partitioned.services.tally_designs``): an
entry of state 'touch' and sign 0 in the statistics' log (it moves no count) naming the
item, so the fold reads the item's steps again — a prediction changed from one wrong class
to another moves no query's bits, and so no entry of annotations' migration 0036, but it
moves the item's inverse-probability weights. Triggers, not application code, as 0036's: no
writer (an import, the admin, raw SQL) changes a prediction without its entry."""

from django.db import migrations

ENTRY = ("annotations_tallyentry (stratum, k, state, first, uniform, neyman, rejected, "
         "withdrawn, study_id, sign, match_mask, present_mask, band_bit0, band_bit1, "
         "band_bit2, item_id)")
READ = ("EXISTS (SELECT 1 FROM annotations_routingdesign d WHERE d.study_id = i.study_id "
        "AND d.kind = 'targeted') AND EXISTS (SELECT 1 FROM annotations_query q WHERE "
        "q.item_id = i.id AND q.status = 'answered' AND NOT q.is_quality_check)")


def touch(items: str) -> str:
    """The entries of the items ``items`` (a FROM source with column item_id) whose steps
    a targeted design's estimate reads — driven from those items (an index probe each: a
    filter on every item of the table cost a scan of it per statement)."""
    return (f"INSERT INTO {ENTRY} SELECT i.stratum, 0, 'touch', FALSE, TRUE, FALSE, FALSE, "
            "FALSE, i.study_id, 0, 0, 0, 0, 0, 0, i.id FROM (SELECT DISTINCT item_id FROM "
            f"{items}) m JOIN annotations_item i ON i.id = m.item_id WHERE {READ};")


def targeted(rows: str) -> str:
    """Whether a system of the rows ``rows`` is of a study with a targeted design (a
    statement's guard: no study without one reads an item of the statement)."""
    return ("EXISTS (SELECT 1 FROM annotations_routingdesign d JOIN assistants_aisystem s ON "
            "s.study_id = d.study_id WHERE d.kind = 'targeted' AND s.id IN (SELECT system_id "
            f"FROM {rows}))")


MOVED = ("OLD.position IS NOT NEW.position OR OLD.item_id IS NOT NEW.item_id OR "
         "OLD.system_id IS NOT NEW.system_id")
SQLITE = [
    "CREATE TRIGGER tally_prediction_insert AFTER INSERT ON assistants_prediction FOR EACH "
    f"ROW BEGIN {touch('(SELECT NEW.item_id AS item_id)')} END",
    "CREATE TRIGGER tally_prediction_delete AFTER DELETE ON assistants_prediction FOR EACH "
    f"ROW BEGIN {touch('(SELECT OLD.item_id AS item_id)')} END",
    "CREATE TRIGGER tally_prediction_update AFTER UPDATE ON assistants_prediction FOR EACH "
    f"ROW WHEN {MOVED} BEGIN "
    f"{touch('(SELECT OLD.item_id AS item_id UNION SELECT NEW.item_id)')} END",
]
MOVED_ROWS = ("(SELECT o.item_id FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE "
              "o.position IS DISTINCT FROM n.position OR o.item_id <> n.item_id OR "
              "o.system_id <> n.system_id UNION SELECT n.item_id FROM old_rows o JOIN "
              "new_rows n ON n.id = o.id WHERE o.position IS DISTINCT FROM n.position OR "
              "o.item_id <> n.item_id OR o.system_id <> n.system_id) m")
POSTGRESQL = []
for event, rows, tables in (("insert", "new_rows", "NEW TABLE AS new_rows"),
                            ("delete", "old_rows", "OLD TABLE AS old_rows"),
                            ("update", MOVED_ROWS,
                             "OLD TABLE AS old_rows NEW TABLE AS new_rows")):
    systems = ("(SELECT system_id FROM old_rows UNION ALL SELECT system_id FROM new_rows) x"
               if event == "update" else rows)
    POSTGRESQL += [
        f"CREATE OR REPLACE FUNCTION tally_prediction_{event}() RETURNS trigger LANGUAGE "
        f"plpgsql AS $$ BEGIN IF {targeted(systems)} THEN {touch(rows)} END IF; RETURN NULL; "
        "END $$",
        f"CREATE TRIGGER tally_prediction_{event} AFTER {event.upper()} ON "
        f"assistants_prediction REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION "
        f"tally_prediction_{event}()"]


def create(apps, schema_editor):
    postgresql = schema_editor.connection.vendor == "postgresql"
    for statement in POSTGRESQL if postgresql else SQLITE:
        schema_editor.execute(statement)


def drop(apps, schema_editor):
    postgresql = schema_editor.connection.vendor == "postgresql"
    for event in ("insert", "delete", "update"):
        schema_editor.execute(f"DROP TRIGGER IF EXISTS tally_prediction_{event}"
                              + (" ON assistants_prediction" if postgresql else ""))
        if postgresql:
            schema_editor.execute(f"DROP FUNCTION IF EXISTS tally_prediction_{event}()")


class Migration(migrations.Migration):

    dependencies = [
        ("annotations", "0038_tally_designs"),
        ("assistants", "0004_prediction_confidence"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
