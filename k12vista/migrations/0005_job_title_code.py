"""Job titles as a code with parameters, worded in the reader's language when shown (issue 25 fault 8).

Titles stored before were worded once, in the language of whoever started the job. The data step reads
each stored title back into its code and parameters when it matches a registered title in Chinese or in
English, and keeps the rest (a run's name, a title no template made) as written."""

import re

from django.db import migrations, models
from django.utils import translation


def _patterns():
    # k12vista.job_text imports no models; its TITLES are what start_job stores from now on.
    from k12vista.job_text import TITLES

    found = []
    for language in ("zh-hans", "en"):
        with translation.override(language):
            for code, template in TITLES.items():
                worded = translation.gettext(template)
                literal = re.sub(r"%\\\(\w+\\\)[sd]", "", re.escape(worded))
                regex = re.sub(r"%\\\((\w+)\\\)[sd]", r"(?P<\1>.+?)", re.escape(worded))
                # The most literal text first: "Campaign %(name)s (retry)" before "%(name)s (retry)".
                found.append((len(literal), code, re.compile(f"^{regex}$", re.S)))
    return [(code, pattern) for _length, code, pattern in sorted(found, key=lambda entry: -entry[0])]


def coded_titles(apps, schema_editor):
    Job = apps.get_model("k12vista", "Job")
    patterns = _patterns()
    for job in Job.objects.filter(title_code="").exclude(title="").iterator():
        for code, pattern in patterns:
            if match := pattern.match(job.title):
                Job.objects.filter(pk=job.pk).update(title_code=code, title_params=match.groupdict())
                break


class Migration(migrations.Migration):
    dependencies = [
        ("k12vista", "0004_guidelines"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="title_code",
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddField(
            model_name="job",
            name="title_params",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(coded_titles, migrations.RunPython.noop),
    ]
