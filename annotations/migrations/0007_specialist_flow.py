"""Specialists' flow (issue 8): opaque public query ids, guidelines, skips, undo/skip events.

``public_id`` is added nullable, filled with one random value per existing row, then made
unique and required (a callable default alone would give every existing row the same value).
"""

import secrets

import annotations.models
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def _fill_public_ids(apps, schema_editor):
    Query = apps.get_model("annotations", "Query")
    batch = []
    for pk in Query.objects.filter(public_id__isnull=True).values_list("pk", flat=True).iterator():
        batch.append(Query(pk=pk, public_id=secrets.token_urlsafe(12)))
        if len(batch) >= 2000:
            Query.objects.bulk_update(batch, ["public_id"])
            batch = []
    if batch:
        Query.objects.bulk_update(batch, ["public_id"])


class Migration(migrations.Migration):

    dependencies = [
        ('annotations', '0006_interval_midp_default'),
    ]

    operations = [
        migrations.AddField(
            model_name='query',
            name='public_id',
            field=models.CharField(editable=False, max_length=22, null=True),
        ),
        migrations.RunPython(_fill_public_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='query',
            name='public_id',
            field=models.CharField(default=annotations.models.new_public_id, editable=False, max_length=22, unique=True),
        ),
        migrations.AddField(
            model_name='study',
            name='guidelines',
            field=models.TextField(blank=True, help_text='Shown to every specialist on the labelling page (Markdown; raw HTML is removed).'),
        ),
        migrations.AddField(
            model_name='studyclass',
            name='guidelines',
            field=models.TextField(blank=True, help_text="Shown to this class's specialists on the labelling page (Markdown; raw HTML is removed)."),
        ),
        migrations.AlterField(
            model_name='queryevent',
            name='kind',
            field=models.CharField(choices=[('routed', 'Routed'), ('issued', 'Issued'), ('rendered', 'Rendered'), ('answered', 'Answered'), ('reclaimed', 'Lease reclaimed'), ('undone', 'Answer undone'), ('skipped', 'Skipped')], max_length=10),
        ),
        migrations.CreateModel(
            name='QuerySkip',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('k', models.PositiveSmallIntegerField()),
                ('is_quality_check', models.BooleanField(default=False)),
                ('at', models.DateTimeField(auto_now_add=True)),
                ('query', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='skips', to='annotations.query')),
                ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='skips', to='annotations.study')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='skips', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'indexes': [models.Index(fields=['study', 'k'], name='skip_study_class')],
                'constraints': [models.UniqueConstraint(fields=('user', 'query'), name='skip_unique_user_query')],
            },
        ),
    ]
