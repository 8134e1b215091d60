"""Who may read the question bank's stored files (the rules ``k12vista.files.readable_file`` applies).

Figures and page images go to those who may see the question (or, for a page,
the document); an uploaded source to its uploader, researchers and admins; a
question export to whoever may see the job that wrote it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.models import Assignment, Figure, Page, Question, SourceDocument
from k12vista.files import StoredFile, file_rule
from k12vista.models import Job
from k12vista.roles import Role, has_role

# Who browses the whole bank (the question browser's roles).
BROWSERS = (Role.RESEARCHER, Role.INSPECTOR, Role.ADMIN)
EXPORT_KIND = "annotation.export_questions"


def browses_the_bank(user: Any) -> bool:
    return any(has_role(user, role) for role in BROWSERS)


def uploaded(user: Any, document_id: int | None) -> bool:
    return document_id is not None and SourceDocument.objects.filter(pk=document_id, uploaded_by=user).exists()


def may_see_question(user: Any, question: Question) -> bool:
    """Browsers see every question; an annotator the ones they hold, and those from files they uploaded."""
    if browses_the_bank(user):
        return True
    if not has_role(user, Role.ANNOTATOR):
        return False
    holds = Assignment.objects.for_annotator(user).open().filter(question=question).exists()
    return holds or uploaded(user, question.source_document_id)


@file_rule("figures/")
def figure_file(user: Any, name: str) -> StoredFile | None:
    figure = Figure.objects.filter(image=name).select_related("question").first()
    if figure is None or not may_see_question(user, figure.question):
        return None
    return StoredFile(name)


@file_rule("pages/")
def page_file(user: Any, name: str) -> StoredFile | None:
    page = Page.objects.filter(image=name).first()
    if page is None:
        return None
    if browses_the_bank(user) or (has_role(user, Role.ANNOTATOR) and uploaded(user, page.document_id)):
        return StoredFile(name)
    # The OCR review shows the page a held question was read from.
    held = Assignment.objects.for_annotator(user).open().filter(question__source_page=page)
    return StoredFile(name) if has_role(user, Role.ANNOTATOR) and held.exists() else None


@file_rule("sources/")
def source_file(user: Any, name: str) -> StoredFile | None:
    document = SourceDocument.objects.filter(file=name).first()
    if document is None:
        return None
    if not (document.uploaded_by_id == user.pk or has_role(user, Role.RESEARCHER) or has_role(user, Role.ADMIN)):
        return None
    # Downloaded under the original stem with our extension: "notice.html" comes back as "notice.pdf".
    return StoredFile(name, download_name=f"{Path(document.original_name).stem or 'source'}.{document.kind}")


@file_rule("exports/questions-")
def question_export_file(user: Any, name: str) -> StoredFile | None:
    job = Job.objects.visible_to(user).filter(kind=EXPORT_KIND, result__path=name).first()
    return StoredFile(name) if job is not None else None
