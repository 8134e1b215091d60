from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"

    def ready(self) -> None:
        # apps.py is loaded before the models; ready() runs once they are.
        from annotation.models import Assignment
        from annotation.pdf import notes  # noqa: F401 (registers the import notes' wordings as reasons)
        from k12vista.work import WorkKind, model_rows, register

        for task in (Assignment.Task.OCR_REVIEW, Assignment.Task.STEP_CORRECTION):
            register(WorkKind(task.value, task.label, model_rows(Assignment, task=task), "annotator", "done_at"))
