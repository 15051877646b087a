from django.db import migrations, models

import annotations.models


def draw_seeds(apps, schema_editor):
    """AddField gives every existing study the same default: draw one per study."""
    Study = apps.get_model("annotations", "Study")
    for study in Study.objects.all():
        study.interval_seed = annotations.models._new_seed()
        study.save(update_fields=["interval_seed"])


class Migration(migrations.Migration):

    dependencies = [
        ("annotations", "0003_study_stratum_sizes"),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="interval_seed",
            field=models.BigIntegerField(default=annotations.models._new_seed, editable=False),
        ),
        migrations.RunPython(draw_seeds, migrations.RunPython.noop),
    ]
