from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from annotation.jsonl_import import import_questions_file
from k12vista.demo import demo_loader

DEMO_QUESTIONS = Path(settings.BASE_DIR) / "fixtures" / "demo_questions.jsonl"


@demo_loader(order=20)
def demo_questions() -> str:
    """Thirty synthetic questions in the reference release format (bench/generate.py)."""
    admin = get_user_model().objects.filter(username="admin").first()
    report = import_questions_file(path=DEMO_QUESTIONS, user=admin)
    return f"demo questions: {report.created} created, {report.unchanged} already there"
