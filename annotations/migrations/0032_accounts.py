"""Issue 27: a one-time password signs in once; look-alike user names are refused (the
name's confusables key, computed for the accounts there are); the evaluation budget's words."""

import django.core.validators
from django.db import migrations, models


def keys_fill(apps, schema_editor):
    from annotations.core.usernames import username_key

    User = apps.get_model("annotations", "User")
    users = list(User.objects.only("pk", "username"))
    for user in users:
        user.username_key = username_key(user.username)
    User.objects.bulk_update(users, ["username_key"], batch_size=1000)


class Migration(migrations.Migration):

    dependencies = [
        ("annotations", "0031_audit_upload_jobs"),
    ]

    operations = [
        migrations.AddField(
            model_name="user",
            name="one_time_password_used_at",
            field=models.DateTimeField(
                blank=True, editable=False, null=True,
                help_text="When the password a researcher handed out signed in: it does not "
                          "again."),
        ),
        migrations.AddField(
            model_name="user",
            name="username_key",
            field=models.CharField(
                db_index=True, default="", editable=False, max_length=600,
                help_text="The user name as a reader sees it (NFKC, Unicode confusables "
                          "skeleton, case-folded): look-alike names are refused."),
        ),
        migrations.RunPython(keys_fill, migrations.RunPython.noop),
        # evaluation refusals below the minimum batch spend the budget (issue 27)
        migrations.AlterField(
            model_name="evaluationtoken",
            name="daily_budget",
            field=models.PositiveIntegerField(
                default=20, validators=[django.core.validators.MinValueValidator(1)],
                help_text="Evaluations per UTC day: accepted ones and those refused below the "
                          "minimum batch (a final report needs one left)."),
        ),
    ]
