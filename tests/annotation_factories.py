"""Small builders for question-bank tests."""

import io
import itertools

from PIL import Image, ImageDraw

from annotation.services import FigureData, QuestionData, create_question

_counter = itertools.count(1)


def figure_png(size=(400, 300), sharp=True) -> bytes:
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    draw.line((20, size[1] - 20, size[0] - 20, size[1] - 20), fill="black", width=2)
    draw.line((20, 20, 20, size[1] - 20), fill="black", width=2)
    draw.ellipse((size[0] // 3, size[1] // 4, size[0] // 3 * 2, size[1] // 4 * 3), outline="black", width=2)
    if not sharp:
        from PIL import ImageFilter

        image = image.filter(ImageFilter.GaussianBlur(6))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def question_data(**overrides) -> QuestionData:
    n = next(_counter)
    data = {
        "hash_id": f"q{n:06d}",
        "subject": "math",
        "grade": 9,
        "qtype": "multiple_choice",
        "text": "已知 $x^2=4$，且 $x>0$，则 $x$ 等于",
        "options": [{"label": label, "text": f"${v}$"} for label, v in zip("ABCD", [1, 2, 3, 4], strict=True)],
        "answers": ["B"],
        "raw_solution": "因为 $x^2=4$ 且 $x>0$，所以 $x=2$。故选 B。",
        "solution_steps": ["由 $x^2=4$ 得 $x=\\pm 2$。", "因为 $x>0$，所以 $x=2$。", "故选 B。"],
        "knowledge_points": ["平方根"],
        "figures": [FigureData(content=figure_png())],
    }
    data.update(overrides)
    return QuestionData(**data)


def make_question(user=None, **overrides):
    return create_question(data=question_data(**overrides), user=user)
