"""The design-weighted estimate's kept statistics (``TallyState.design``, ``TallyItem``:
``annotations.partitioned.services.tally_designs``); the triggers that log a prediction's
change for them are assistants' migration 0005 (on its table)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotations', '0037_tally_moments'),
    ]

    operations = [
        migrations.AddField(
            model_name='tallystate',
            name='design',
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='TallyItem',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('item_id', models.BigIntegerField()),
                ('steps', models.PositiveIntegerField()),
                ('keys', models.BinaryField()),
                ('designs', models.BinaryField()),
                ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                            related_name='tally_items',
                                            to='annotations.study')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('study', 'item_id'),
                                                        name='tally_item_unique')],
            },
        ),
    ]
