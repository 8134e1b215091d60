"""Who may read PEBench's stored files (the rules ``k12vista.files.readable_file`` applies).

PEBench exports and import files hold the labels of many items, so they follow
the blind rule as a whole (``labelling.may_read_label_files``): never to an
annotator, nor to anyone holding an unsubmitted labelling task; and only to
whoever may see the job. A question's figures also go to the people labelling
a chain of thought on it.
"""

from __future__ import annotations

from typing import Any

from k12vista.files import StoredFile, file_rule
from k12vista.models import Job
from k12vista.roles import Role, has_role
from pem import jobs, labelling
from pem.models import LabellingTask


@file_rule("exports/pebench-")
def pebench_export_file(user: Any, name: str) -> StoredFile | None:
    if not labelling.may_read_label_files(user):
        return None
    job = Job.objects.visible_to(user).filter(kind=jobs.EXPORT, result__path=name).first()
    return StoredFile(name) if job is not None else None


@file_rule("pem-imports/")
def pebench_import_file(user: Any, name: str) -> StoredFile | None:
    if not labelling.may_read_label_files(user):
        return None
    job = Job.objects.visible_to(user).filter(kind=jobs.IMPORT, params__file=name).first()
    return StoredFile(name) if job is not None else None


@file_rule("figures/")
def figure_of_labelled_item(user: Any, name: str) -> StoredFile | None:
    """The labelling page shows the question's figures to whoever holds a task on one of its chains."""
    if not has_role(user, Role.ANNOTATOR):
        return None
    tasks = LabellingTask.objects.for_annotator(user).filter(cot__question__figures__image=name)
    return StoredFile(name) if tasks.exists() else None
