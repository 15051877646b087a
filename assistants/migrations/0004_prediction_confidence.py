"""Prediction.confidence, the AI systems' confidence bands and a study's banding scheme.

SQLite rebuilds the prediction and AI-system tables to add these columns; its same-study
triggers (0002) name those tables, so they are dropped first and created again after."""

import importlib

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


_guards = importlib.import_module("assistants.migrations.0002_same_study_guards")


def _sqlite(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for sql in statements:
                schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ('annotations', '0017_query_band_bits'),
        ('assistants', '0003_trace_samples'),
    ]

    operations = [
        migrations.RunPython(_sqlite(_guards.SQLITE_BACKWARD), _sqlite(_guards.SQLITE_FORWARD)),
        migrations.CreateModel(
            name='ConfidenceBands',
            fields=[
                ('study', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='confidence_bands', serialize=False, to='annotations.study')),
                ('scheme', models.CharField(choices=[('quantile', "Equal shares of each system's items (quantiles)"), ('fixed', 'Fixed edges, the same for every system')], default='quantile', max_length=10)),
                ('n_bands', models.PositiveSmallIntegerField(default=3, help_text='Quantile scheme: how many bands (ties never straddle a band edge, so a system with few distinct confidences may get fewer).', validators=[django.core.validators.MinValueValidator(2), django.core.validators.MaxValueValidator(7)])),
                ('edges', models.JSONField(blank=True, default=list, help_text='Fixed scheme: the upper edges of every band but the last, ascending, strictly between 0 and 1, e.g. [0.5, 0.8]: bands ≤ 0.5, 0.5–0.8, > 0.8.')),
            ],
            options={
                'verbose_name': 'confidence bands',
                'verbose_name_plural': 'confidence bands',
            },
        ),
        migrations.AddField(
            model_name='aisystem',
            name='band_edges',
            field=models.JSONField(default=list, editable=False),
        ),
        migrations.AddField(
            model_name='aisystem',
            name='band_stats',
            field=models.JSONField(default=list, editable=False),
        ),
        migrations.AddField(
            model_name='prediction',
            name='confidence',
            field=models.FloatField(blank=True, help_text="The system's own confidence in this answer (0–1), when it gives one: the dashboard estimates its accuracy per confidence band.", null=True, validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)]),
        ),
        migrations.AddConstraint(
            model_name='prediction',
            constraint=models.CheckConstraint(condition=models.Q(('confidence__isnull', True), models.Q(('confidence__gte', 0.0), ('confidence__lte', 1.0)), _connector='OR'), name='prediction_confidence_range'),
        ),
        migrations.RunPython(_sqlite(_guards.SQLITE_FORWARD), _sqlite(_guards.SQLITE_BACKWARD)),
    ]
