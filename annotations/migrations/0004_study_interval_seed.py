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
        migrations.AddField(
            model_name="study",
            name="interval_method",
            field=models.CharField(
                choices=[("auto", "Exact 95 % (randomised where labels are few)"),
                         ("conservative", "Conservative (at least 95 %, wider on few labels)")],
                default="auto",
                help_text="How the 95 % intervals are made where a system has few errors, "
                "few correct answers or few complementary hits: randomised exact (covers 95 "
                "%) or conservative (covers at least 95 %, up to 99.5 % on small samples, "
                "same data → same interval). Fixed once the study opens.",
                max_length=12,
            ),
        ),
    ]
