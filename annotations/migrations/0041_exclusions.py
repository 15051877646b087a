"""Exclusions (``core.exclusion_models``): the rules and the answers they take out; the
partitioned statistics' triggers re-created so that an excluded answer counts as a rejected
one (``rejected`` = left out), with triggers on the excluded answers themselves."""

import importlib

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

triggers = importlib.import_module("annotations.migrations.0036_tally_triggers")


def _recreate(excluding: bool):
    def run(apps, schema_editor):
        postgresql = schema_editor.connection.vendor == "postgresql"
        for name in triggers.EXCLUSION_TRIGGERS:
            if postgresql:
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON "
                                      "annotations_excludedanswer")
                schema_editor.execute(f"DROP FUNCTION IF EXISTS {name}()")
            else:
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")
        if postgresql:
            statements = [s for s in triggers.postgresql_statements(True, excluding)
                          if s.startswith("CREATE OR REPLACE FUNCTION")
                          or any(f"TRIGGER {name} " in s for name in triggers.EXCLUSION_TRIGGERS)]
        else:
            for name in triggers.SQLITE_TRIGGERS:
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")
            statements = triggers.sqlite_statements(True, excluding)
        for statement in statements:
            schema_editor.execute(statement)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ('annotations', '0040_webhooks'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="exclusions_standing",
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.CreateModel(
            name='Exclusion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('worker', 'Every answer of a worker'), ('before', 'Answers before a time'), ('after', 'Answers from a time on'), ('faster', 'Answers faster than a threshold')], max_length=8)),
                ('at', models.DateTimeField(blank=True, null=True)),
                ('faster_than_ms', models.PositiveIntegerField(blank=True, null=True)),
                ('reason', models.TextField(max_length=2000)),
                ('answers', models.PositiveIntegerField(default=0)),
                ('released', models.PositiveIntegerField(default=0)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('undone_at', models.DateTimeField(blank=True, null=True)),
                ('undo_reason', models.TextField(blank=True, default='', max_length=2000)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='exclusions', to='annotations.study')),
                ('undone_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('worker', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='ExcludedAnswer',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('answer_id', models.PositiveBigIntegerField()),
                ('answer_type', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='contenttypes.contenttype')),
                ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotations.study')),
                ('worker', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('exclusion', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='excluded_answers', to='annotations.exclusion')),
            ],
        ),
        migrations.AddIndex(
            model_name='exclusion',
            index=models.Index(fields=['study', 'undone_at'], name='exclusion_study_live'),
        ),
        migrations.AddConstraint(
            model_name='exclusion',
            constraint=models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='exclusion_has_reason'),
        ),
        migrations.AddConstraint(
            model_name='exclusion',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('kind', 'worker'), ('worker__isnull', False)), models.Q(('at__isnull', False), ('kind__in', ('before', 'after'))), models.Q(('faster_than_ms__gt', 0), ('kind', 'faster')), _connector='OR'), name='exclusion_kind_has_bound'),
        ),
        migrations.AddIndex(
            model_name='excludedanswer',
            index=models.Index(fields=['study', 'answer_type'], name='excluded_answer_study'),
        ),
        migrations.AddConstraint(
            model_name='excludedanswer',
            constraint=models.UniqueConstraint(fields=('answer_type', 'answer_id'), name='excluded_answer_once'),
        ),
        migrations.RunPython(_recreate(True), _recreate(False), elidable=False),
    ]
