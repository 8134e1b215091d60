"""Who may read the inference app's stored files (the rules ``k12vista.files.readable_file`` applies).

A scoring run's results in the reference layout go to whoever may see the job that wrote them
(its starter, and administrators): they hold the run's answers and judgments.
"""

from __future__ import annotations

from typing import Any

from inference.reference.results import KIND
from k12vista.files import StoredFile, file_rule
from k12vista.models import Job


@file_rule("exports/reference-results-")
def reference_results_file(user: Any, name: str) -> StoredFile | None:
    job = Job.objects.visible_to(user).filter(kind=KIND, result__path=name).first()
    return StoredFile(name) if job is not None else None
