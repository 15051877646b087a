"""Database triggers that write ``TallyEntry`` rows — the log the maintained statistics are
folded from (``annotations.partitioned.services.tallies``) — in the transaction of every
change that moves a routed query's counted place: its answer, undo, class, stratum, draw,
AI systems' bits (queries), a hand-back (skips), its item's withdrawal (flags) and its
answer's rejection (reviews). One signed row per query and side: −1 at the old place, +1 at
the new. Triggers, not application code, so no writer (an ORM ``update``, a bulk import, raw
SQL) can move a count without its entry.

PostgreSQL: statement-level triggers over transition tables (one INSERT per statement,
whatever its rows); a flag or review change first locks its queries' rows, so it and a
concurrent answer to the same query are ordered and each sees the other's committed state.
SQLite: row-level triggers (one writer at a time).

Migration 0037 re-creates them writing each entry's ``item_id`` too (``item=True`` below);
migration 0041 counts an excluded answer (``ExcludedAnswer``) as a rejected one and adds the
triggers of exclusions (``excluded=True``)."""

from django.db import migrations

ENTRY = "annotations_tallyentry"
COLUMNS = ("stratum, k, state, first, uniform, neyman, rejected, withdrawn, study_id, sign, "
           "match_mask, present_mask, band_bit0, band_bit1, band_bit2")
ANSWERED = "{r}.status = 'answered'"


def columns(item: bool) -> str:
    return COLUMNS + (", item_id" if item else "")


QUERY_TYPE = ("(SELECT id FROM django_content_type WHERE app_label = 'annotations' AND "
              "model = 'query')")


def rejected(r: str) -> str:
    return ("EXISTS (SELECT 1 FROM annotations_answerreview v JOIN django_content_type c "
            "ON c.id = v.answer_type_id WHERE c.app_label = 'annotations' AND c.model = "
            f"'query' AND v.answer_id = {r}.id AND v.state = 'rejected')")


def excluded(r: str) -> str:
    """Query row ``r``'s answer is excluded (one row per answer: migration 0041)."""
    return (f"EXISTS (SELECT 1 FROM annotations_excludedanswer e WHERE e.answer_type_id = "
            f"{QUERY_TYPE} AND e.answer_id = {r}.id)")


def left_out(r: str, excluding: bool) -> str:
    """What the entry's ``rejected`` column holds: rejected by a review, or excluded."""
    return f"({rejected(r)} OR {excluded(r)})" if excluding else rejected(r)


def withdrawn(r: str) -> str:
    return ("EXISTS (SELECT 1 FROM annotations_itemflag f WHERE f.study_id = "
            f"{r}.study_id AND f.item_id = {r}.item_id AND f.resolution = 'withdrawn')")


def place(r: str, sign: int, *, rejected_as: str | None = None,
          withdrawn_as: str | None = None, item: bool = False, excluding: bool = False) -> str:
    """The SELECT list of query row ``r``'s entry with ``sign`` (every column of
    ``columns(item)``)."""
    answered = ANSWERED.format(r=r)
    bits = ", ".join(f"CASE WHEN {answered} THEN COALESCE({r}.{c}, 0) ELSE 0 END"
                     for c in ("match_mask", "present_mask", "band_bit0", "band_bit1",
                               "band_bit2"))
    return (f"{r}.stratum, {r}.k, CASE WHEN {answered} THEN {r}.answer ELSE 'open' END, "
            f"{r}.sequence = 0, ({r}.draw_uniform IS NULL OR {r}.draw_uniform), "
            "EXISTS (SELECT 1 FROM annotations_routingdesign d WHERE d.id = "
            f"{r}.design_id AND d.kind = 'neyman'), "
            f"{rejected_as or left_out(r, excluding)}, {withdrawn_as or withdrawn(r)}, "
            f"{r}.study_id, "
            f"{sign}, {bits}" + (f", {r}.item_id" if item else ""))


QUERY_COLUMNS = ("status", "answer", "stratum", "k", "sequence", "is_quality_check",
                 "draw_uniform", "design_id", "item_id", "study_id")
BIT_COLUMNS = ("match_mask", "present_mask", "band_bit0", "band_bit1", "band_bit2")


def changed(o: str, n: str, distinct: str) -> str:
    """Whether the update from ``o`` to ``n`` moves the query's place (its answer, class,
    stratum, draw, …; the AI bits only of an answered query)."""
    terms = [f"({ANSWERED.format(r=o)}) {distinct} ({ANSWERED.format(r=n)})"]
    terms += [f"{o}.{c} {distinct} {n}.{c}" for c in QUERY_COLUMNS[1:]]
    bits = " OR ".join(f"{o}.{c} {distinct} {n}.{c}" for c in BIT_COLUMNS)
    return " OR ".join(terms) + f" OR ({ANSWERED.format(r=n)} AND ({bits}))"


def item_queries(study: str, item: str) -> str:
    return (f"FROM annotations_query q WHERE q.study_id = {study} AND q.item_id = {item} "
            "AND NOT q.is_quality_check")


def skip_entry(r: str, sign: int, item: bool = False) -> str:
    false = "FALSE"
    return (f"'', {r}.k, 'skip', {false}, TRUE, {false}, {false}, {false}, {r}.study_id, "
            f"{sign}, 0, 0, 0, 0, 0" + (", NULL" if item else ""))


# --- SQLite: row-level triggers --------------------------------------------------------------
def sqlite_statements(item: bool = False, excluding: bool = False) -> list[str]:
    entry = f"{ENTRY} ({columns(item)})"

    def place_(*args, **kwargs) -> str:
        return place(*args, **kwargs, item=item, excluding=excluding)

    other_withdrawn = ("EXISTS (SELECT 1 FROM annotations_itemflag g WHERE g.study_id = "
                       "{r}.study_id AND g.item_id = {r}.item_id AND g.resolution = "
                       "'withdrawn' AND g.id <> {r}.id)")

    def flag_move(r: str, before: str, after: str) -> str:
        return (f"INSERT INTO {entry} SELECT {place_('q', -1, withdrawn_as=before)} "
                f"{item_queries(f'{r}.study_id', f'{r}.item_id')}; "
                f"INSERT INTO {entry} SELECT {place_('q', 1, withdrawn_as=after)} "
                f"{item_queries(f'{r}.study_id', f'{r}.item_id')};")

    def review_move(r: str, before: str, after: str, *, exclusion: bool = False) -> str:
        """Move the query of answer row ``r`` (a review's, or an exclusion's) from
        ``rejected`` = ``before`` to ``after``; a review's move counts an exclusion in both."""
        target = (f"FROM annotations_query q WHERE q.id = {r}.answer_id AND NOT "
                  f"q.is_quality_check AND {r}.answer_type_id = {QUERY_TYPE}")
        if excluding and not exclusion:
            before, after = (f"(({side}) OR {excluded('q')})" for side in (before, after))
        return (f"INSERT INTO {entry} SELECT {place_('q', -1, rejected_as=before)} "
                f"{target}; INSERT INTO {entry} SELECT "
                f"{place_('q', 1, rejected_as=after)} {target};")

    exclusions = [
        # one row per answer: its coming and going moves the query between its review's
        # verdict and "left out"
        "CREATE TRIGGER tally_exclusion_insert AFTER INSERT ON annotations_excludedanswer "
        f"FOR EACH ROW BEGIN {review_move('NEW', rejected('q'), 'TRUE', exclusion=True)} END",
        "CREATE TRIGGER tally_exclusion_delete AFTER DELETE ON annotations_excludedanswer "
        f"FOR EACH ROW BEGIN {review_move('OLD', 'TRUE', rejected('q'), exclusion=True)} END",
    ] if excluding else []
    return exclusions + [
        f"CREATE TRIGGER tally_query_insert AFTER INSERT ON annotations_query FOR EACH ROW "
        f"WHEN NOT NEW.is_quality_check BEGIN INSERT INTO {entry} SELECT "
        f"{place_('NEW', 1)}; END",
        f"CREATE TRIGGER tally_query_delete AFTER DELETE ON annotations_query FOR EACH ROW "
        f"WHEN NOT OLD.is_quality_check BEGIN INSERT INTO {entry} SELECT "
        f"{place_('OLD', -1)}; END",
        f"CREATE TRIGGER tally_query_update AFTER UPDATE ON annotations_query FOR EACH ROW "
        f"WHEN {changed('OLD', 'NEW', 'IS NOT')} BEGIN "
        f"INSERT INTO {entry} SELECT {place_('OLD', -1)} WHERE NOT "
        f"OLD.is_quality_check; INSERT INTO {entry} SELECT {place_('NEW', 1)} "
        "WHERE NOT NEW.is_quality_check; END",
        f"CREATE TRIGGER tally_skip_insert AFTER INSERT ON annotations_queryskip FOR EACH ROW "
        f"WHEN NOT NEW.is_quality_check BEGIN INSERT INTO {entry} SELECT "
        f"{skip_entry('NEW', 1, item)}; END",
        f"CREATE TRIGGER tally_skip_delete AFTER DELETE ON annotations_queryskip FOR EACH ROW "
        f"WHEN NOT OLD.is_quality_check BEGIN INSERT INTO {entry} SELECT "
        f"{skip_entry('OLD', -1, item)}; END",
        # an item is withdrawn while any of its flags is: a change moves its queries only
        # when no other flag of the item is withdrawn
        "CREATE TRIGGER tally_flag_insert AFTER INSERT ON annotations_itemflag FOR EACH ROW "
        f"WHEN NEW.resolution = 'withdrawn' AND NOT {other_withdrawn.format(r='NEW')} BEGIN "
        f"{flag_move('NEW', 'FALSE', 'TRUE')} END",
        "CREATE TRIGGER tally_flag_update AFTER UPDATE OF resolution ON annotations_itemflag "
        "FOR EACH ROW WHEN (OLD.resolution = 'withdrawn') <> (NEW.resolution = 'withdrawn') "
        f"AND NOT {other_withdrawn.format(r='NEW')} BEGIN "
        f"{flag_move('NEW', 'OLD.resolution = ' + repr('withdrawn'), 'NEW.resolution = ' + repr('withdrawn'))} END",
        "CREATE TRIGGER tally_flag_delete AFTER DELETE ON annotations_itemflag FOR EACH ROW "
        f"WHEN OLD.resolution = 'withdrawn' AND NOT {other_withdrawn.format(r='OLD')} BEGIN "
        f"{flag_move('OLD', 'TRUE', 'FALSE')} END",
        "CREATE TRIGGER tally_review_insert AFTER INSERT ON annotations_answerreview FOR EACH "
        f"ROW WHEN NEW.state = 'rejected' BEGIN {review_move('NEW', 'FALSE', 'TRUE')} END",
        "CREATE TRIGGER tally_review_update AFTER UPDATE OF state ON annotations_answerreview "
        "FOR EACH ROW WHEN (OLD.state = 'rejected') <> (NEW.state = 'rejected') BEGIN "
        f"{review_move('NEW', 'OLD.state = ' + repr('rejected'), 'NEW.state = ' + repr('rejected'))} END",
        "CREATE TRIGGER tally_review_delete AFTER DELETE ON annotations_answerreview FOR EACH "
        f"ROW WHEN OLD.state = 'rejected' BEGIN {review_move('OLD', 'TRUE', 'FALSE')} END",
    ]


SQLITE_TRIGGERS = ("tally_query_insert", "tally_query_delete", "tally_query_update",
                   "tally_skip_insert", "tally_skip_delete", "tally_flag_insert",
                   "tally_flag_update", "tally_flag_delete", "tally_review_insert",
                   "tally_review_update", "tally_review_delete")
EXCLUSION_TRIGGERS = ("tally_exclusion_insert", "tally_exclusion_delete")


# --- PostgreSQL: statement-level triggers over transition tables -----------------------------
def postgresql_statements(item: bool = False, excluding: bool = False) -> list[str]:
    def place_(*args, **kwargs) -> str:
        return place(*args, **kwargs, item=item, excluding=excluding)

    def function(name: str, body: str) -> str:
        return (f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN {body} RETURN NULL; END $$")

    def trigger(name: str, table: str, event: str, tables: str) -> str:
        return (f"CREATE TRIGGER {name} AFTER {event} ON {table} REFERENCING {tables} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION {name}()")

    insert = f"INSERT INTO {ENTRY} ({columns(item)}) "
    query_changed = changed("o", "n", "IS DISTINCT FROM")
    # flags: an item's withdrawal before the statement (the rows it did not touch, and its
    # old rows) and after; its queries move when the two differ
    flag_items = ("SELECT study_id, item_id FROM new_rows x UNION SELECT study_id, item_id "
                  "FROM old_rows z")
    before = ("(EXISTS (SELECT 1 FROM annotations_itemflag f WHERE f.study_id = i.study_id "
              "AND f.item_id = i.item_id AND f.resolution = 'withdrawn' AND f.id NOT IN "
              "(SELECT id FROM new_rows y)) OR EXISTS (SELECT 1 FROM old_rows f WHERE "
              "f.study_id = i.study_id AND f.item_id = i.item_id AND f.resolution = "
              "'withdrawn'))")
    after = ("EXISTS (SELECT 1 FROM annotations_itemflag f WHERE f.study_id = i.study_id AND "
             "f.item_id = i.item_id AND f.resolution = 'withdrawn')")
    flag_body = (
        f"CREATE TEMP TABLE IF NOT EXISTS tally_moved (study_id bigint, item_id bigint, "
        "was boolean, now boolean) ON COMMIT DROP; DELETE FROM tally_moved; "
        f"INSERT INTO tally_moved SELECT i.study_id, i.item_id, {before}, {after} FROM "
        f"({flag_items}) i; DELETE FROM tally_moved WHERE was = now; "
        "PERFORM 1 FROM annotations_query q JOIN tally_moved m ON q.study_id = m.study_id "
        "AND q.item_id = m.item_id ORDER BY q.id FOR UPDATE OF q; "
        f"{insert} SELECT {place_('q', -1, withdrawn_as='m.was')} FROM annotations_query q "
        "JOIN tally_moved m ON q.study_id = m.study_id AND q.item_id = m.item_id WHERE NOT "
        f"q.is_quality_check UNION ALL SELECT {place_('q', 1, withdrawn_as='m.now')} FROM "
        "annotations_query q JOIN tally_moved m ON q.study_id = m.study_id AND q.item_id = "
        "m.item_id WHERE NOT q.is_quality_check;")
    review_pairs = ("SELECT COALESCE(n.answer_id, o.answer_id) AS answer_id, "
                    "COALESCE(o.state = 'rejected', FALSE) AS was, "
                    "COALESCE(n.state = 'rejected', FALSE) AS now FROM new_rows n FULL JOIN "
                    "old_rows o ON o.id = n.id WHERE COALESCE(n.answer_type_id, "
                    f"o.answer_type_id) = {QUERY_TYPE}")
    was, now = ((f"({side} OR {excluded('q')})" for side in ("m.was", "m.now"))
                if excluding else ("m.was", "m.now"))
    review_body = (
        "CREATE TEMP TABLE IF NOT EXISTS tally_rejected (answer_id bigint, was boolean, now "
        "boolean) ON COMMIT DROP; DELETE FROM tally_rejected; "
        f"INSERT INTO tally_rejected SELECT * FROM ({review_pairs}) p WHERE was <> now; "
        "PERFORM 1 FROM annotations_query q JOIN tally_rejected m ON q.id = m.answer_id "
        "ORDER BY q.id FOR UPDATE OF q; "
        f"{insert} SELECT {place_('q', -1, rejected_as=was)} FROM annotations_query q JOIN "
        "tally_rejected m ON q.id = m.answer_id WHERE NOT q.is_quality_check UNION ALL "
        f"SELECT {place_('q', 1, rejected_as=now)} FROM annotations_query q JOIN "
        "tally_rejected m ON q.id = m.answer_id WHERE NOT q.is_quality_check;")
    # an exclusion's rows (one per answer) in or out: the query moves between its review's
    # verdict and "left out"; its row locked first, as for a review
    excluded_queries = ("FROM annotations_query q JOIN rows_ x ON q.id = x.answer_id WHERE "
                        f"x.answer_type_id = {QUERY_TYPE}")

    def exclusion_body(rows: str, before: str, after: str) -> str:
        target = excluded_queries.replace("rows_", rows)
        return (f"PERFORM 1 {target} ORDER BY q.id FOR UPDATE OF q; "
                f"{insert} SELECT {place_('q', -1, rejected_as=before)} {target} AND NOT "
                f"q.is_quality_check UNION ALL SELECT {place_('q', 1, rejected_as=after)} "
                f"{target} AND NOT q.is_quality_check;")

    exclusions = [
        function("tally_exclusion_insert", exclusion_body("new_rows", rejected("q"), "TRUE")),
        trigger("tally_exclusion_insert", "annotations_excludedanswer", "INSERT",
                "NEW TABLE AS new_rows"),
        function("tally_exclusion_delete", exclusion_body("old_rows", "TRUE", rejected("q"))),
        trigger("tally_exclusion_delete", "annotations_excludedanswer", "DELETE",
                "OLD TABLE AS old_rows"),
    ] if excluding else []
    both = "OLD TABLE AS old_rows NEW TABLE AS new_rows"
    return exclusions + [
        function("tally_query_insert", f"{insert} SELECT {place_('n', 1)} FROM new_rows n "
                 "WHERE NOT n.is_quality_check;"),
        trigger("tally_query_insert", "annotations_query", "INSERT", "NEW TABLE AS new_rows"),
        function("tally_query_delete", f"{insert} SELECT {place_('o', -1)} FROM old_rows o "
                 "WHERE NOT o.is_quality_check;"),
        trigger("tally_query_delete", "annotations_query", "DELETE", "OLD TABLE AS old_rows"),
        function("tally_query_update",
                 f"{insert} SELECT {place_('o', -1)} FROM old_rows o JOIN new_rows n ON n.id = "
                 f"o.id WHERE NOT o.is_quality_check AND ({query_changed}) UNION ALL SELECT "
                 f"{place_('n', 1)} FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE NOT "
                 f"n.is_quality_check AND ({query_changed});"),
        trigger("tally_query_update", "annotations_query", "UPDATE", both),
        function("tally_skip_insert", f"{insert} SELECT {skip_entry('n', 1, item)} FROM new_rows n "
                 "WHERE NOT n.is_quality_check;"),
        trigger("tally_skip_insert", "annotations_queryskip", "INSERT", "NEW TABLE AS new_rows"),
        function("tally_skip_delete", f"{insert} SELECT {skip_entry('o', -1, item)} FROM old_rows o "
                 "WHERE NOT o.is_quality_check;"),
        trigger("tally_skip_delete", "annotations_queryskip", "DELETE", "OLD TABLE AS old_rows"),
        # one function per event: a transition table a trigger does not have cannot be named
        function("tally_flag_insert", flag_body.replace("FROM old_rows", "FROM (SELECT * "
                 "FROM new_rows WHERE FALSE)")),
        trigger("tally_flag_insert", "annotations_itemflag", "INSERT", "NEW TABLE AS new_rows"),
        function("tally_flag_update", flag_body),
        trigger("tally_flag_update", "annotations_itemflag", "UPDATE", both),
        function("tally_flag_delete", flag_body.replace("FROM new_rows", "FROM (SELECT * FROM "
                 "old_rows WHERE FALSE)")),
        trigger("tally_flag_delete", "annotations_itemflag", "DELETE", "OLD TABLE AS old_rows"),
        function("tally_review_insert", review_body.replace("old_rows o", "(SELECT * FROM "
                 "new_rows WHERE FALSE) o")),
        trigger("tally_review_insert", "annotations_answerreview", "INSERT",
                "NEW TABLE AS new_rows"),
        function("tally_review_update", review_body),
        trigger("tally_review_update", "annotations_answerreview", "UPDATE", both),
        function("tally_review_delete", review_body.replace("new_rows n", "(SELECT * FROM "
                 "old_rows WHERE FALSE) n")),
        trigger("tally_review_delete", "annotations_answerreview", "DELETE",
                "OLD TABLE AS old_rows"),
    ]


TABLES = {"query": "annotations_query", "skip": "annotations_queryskip",
          "flag": "annotations_itemflag", "review": "annotations_answerreview",
          "exclusion": "annotations_excludedanswer"}


def create(apps, schema_editor):
    statements = (postgresql_statements() if schema_editor.connection.vendor == "postgresql"
                  else sqlite_statements())
    for statement in statements:
        schema_editor.execute(statement)


def drop(apps, schema_editor):
    for name in SQLITE_TRIGGERS:
        table = TABLES[name.split("_")[1]]
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
            schema_editor.execute(f"DROP FUNCTION IF EXISTS {name}()")
        else:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")


class Migration(migrations.Migration):

    dependencies = [
        ('annotations', '0035_tallies'),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
