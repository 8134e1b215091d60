"""From lines in reading order to questions.

The grammar of a Chinese exam paper: section headers (一、选择题) set the type
of the questions after them; a question starts with its number (``1．``) and
runs until the next number, section or answer section, across columns and
pages; options start with ``A．``, several to a line or one a line;
sub-questions start with ``(1)``, ``（1）`` or ``①``; ``【答案】`` and
``【解析】`` start the answer and the solution. An answer section at the end
(参考答案) has numbered entries that are matched back to the questions.

Only numbers that follow on from the previous question start a new one, so a
``2.`` inside a solution or a wrapped line does not split a question.

This module cuts the paper into questions and reads its answer section;
``parts.py`` routes a question's lines to its stem, options, answer and
solution, and ``matching.py`` merges a second print of the paper and matches
the answer section's entries back to the questions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from annotation.pdf.answers import MARKER, SCOPED_ITEM, answer_pieces, item_number, later_dot_items
from annotation.pdf.consistency import LEFTOVER_CHARS, MAX_SKIPPED, consistency_report
from annotation.pdf.layout import Line
from annotation.pdf.matching import match_answers, merge_copies, opening, scope_numbers
from annotation.pdf.notes import Note, english, note
from annotation.pdf.numbering import PAREN_NUMBER, badge_runs, bracketed_questions
from annotation.pdf.options import (
    fill_option_gaps,
    guess_type,
    numbered_options,
    numbered_picture_options,
    own_choice,
    split_answer,
)
from annotation.pdf.parts import SUB_QUESTION, add_text, join_line
from k12vista.vocabulary import QuestionType

CN_NUMERAL = "一二三四五六七八九十"
# 一、选择题 / 二．填空题 / 第三部分 解答题 / 第二大题：计算题
SECTION = re.compile(
    rf"^(?:第?([{CN_NUMERAL}]+)(?:部分|大题)\s*[、．.:：]?|([{CN_NUMERAL}]+)\s*[、．.:：])\s*[(（]?\s*(\S{{0,12}}?题)"
)
# A heading whose numeral was lost or never printed: "填空题（10分）（把答案…）", "选择题：本题共8小题".
BARE_SECTION = re.compile(r"^()()((?:单项|多项|不定项)?(?:选择|填空|解答|计算|实验|简答|作图)题)\s*(?:[(（:：]|$)")
SECTION_TYPES = [
    (("非选择", "选考", "选做"), QuestionType.FREE_RESPONSE),  # before 选择: 非选择题 is no choice section
    (("选择", "单选", "多选"), QuestionType.MULTIPLE_CHOICE),
    (("填空",), QuestionType.FILL_IN_BLANK),
    (("解答", "计算", "问答", "证明", "简答", "综合", "实验", "探究", "作图", "应用"), QuestionType.FREE_RESPONSE),
]
# "参考答案" also covers 参考答案与解析, 参考答案及评分标准 and the like; a bare "答案" only as a
# whole line, since "【答案】C" starts an inline answer.
ANSWER_SECTION = re.compile(
    r"^【?(?:参考答案|答案与解析|答案解析|答案及解析|答案[:：]?】?$)|(?:参考答案|试题答案|答案与解析|答案及解析|试题解析)"
)
INTRODUCES = re.compile(r"如下\s*[:：]?\s*$")  # "参考答案如下：" inside an answer is no heading
# Instructions to candidates number their points "1．… 2．…"; they are no questions.
NOTICE = re.compile(r"^\s*(?:注意事项|考生须知|考生注意|注意)\s*[:：]?")
UNNUMBERED = re.compile(rf"^([{CN_NUMERAL}]+)\s*[、．.]\s*[(（]\s*\d{{1,2}}\s*分\s*[)）]\s*(.*)$")
STATED_COUNT = re.compile(r"共\s*(\d{1,2})\s*(?:小)?题|有\s*(\d{1,2})\s*个?小题")
SCORE_PREFIX = re.compile(r"^\s*[(（]\s*\d{1,2}\s*分\s*[)）]")
# "3.2019 年…" is question 3 about a year; "6.60" at a line start is a number in a table.
NUMBER = re.compile(r"^(\d{1,4})\s*(?:[．、]|\.(?!\d)|\.(?=\d{4}\s*年))\s*")
# A choice key written as a run: "1-5 CBADA", "6～10：ABCDA".
MISREAD_NUMBER = re.compile(r"^(\d{1,3})\s*[:：,，]\s*(?=[^\d\s])")
CHOICE_RUN = re.compile(r"^(\d{1,3})\s*[-～~—–]\s*(\d{1,3})\s*[:：.．、]?\s*([A-H]+)\s*$")
# What follows a number in an answer section: a choice letter, an answer or solution marker, "见解析".
ANSWER_LIKE = re.compile(
    r"^\s*(?:[A-H]{1,4}(?:\s*(?:【|[。.．;；,，]|$)|\s+\d)|【(?:答案|解析|详解|分析|解答)】|[\[［][A-H]|见解析|略)"
)
# "缺第2-4题", "（缺第5题）", "第2～4题缺": the paper says which of its questions it does not hold.
SAID_MISSING = re.compile(
    r"缺\s*第?\s*(\d{1,3})\s*(?:[-—–~～至到、,，]\s*(\d{1,3}))?\s*小?题"
    r"|第\s*(\d{1,3})\s*(?:[-—–~～至到]\s*(\d{1,3}))?\s*小?题\s*[(（]?\s*缺"
)
# 一、已知函数… : a question numbered only by its section numeral (no 题 heading follows the numeral).
CN_ITEM = re.compile(rf"^([{CN_NUMERAL}]{{1,3}})\s*[、．.]\s*(\S.*)$")
BADGE = re.compile(r"^\d{1,3}$")
LONE_NUMBER = re.compile(r"^\s*\d{1,3}\s*$")
# An answer table's rows: "题号 13 14 15 16" (or "题号" alone, its cells on the lines after) and "答案 B B B D".
KEY_NUMBERS = re.compile(r"^(?:题\s*号\s*[:：]?)\s*((?:\d{1,3}\s*)*)$|^((?:\d{1,3}\s+){2,}\d{1,3})$")
KEY_LETTERS = re.compile(r"^(?:答\s*案\s*[:：]?)?\s*((?:[A-H]{1,4}\s*)*)$")
MAX_JUMP = 12  # questions that may be missing from a file when the numbering goes on after the jump
# "阅读下列材料，回答23-27题", "根据以下实验，完成第5～7题": material for the questions in that range.
SHARED_STEM = re.compile(
    r"(?:回答|完成|解答|作答|做|answer)\s*第?\s*(\d{1,3})\s*[-—–~～至到]\s*(\d{1,3})\s*小?题"
    r"|[(（]?\s*(\d{1,3})\s*[-—–~～至到]\s*(\d{1,3})\s*小?题\s*[)）]?\s*(?:共用|阅读|根据)"
    r"|(?:回答|完成|解答|作答)\s*第\s*(\d{1,3})\s*小?题"  # 读图，完成第6题: material for one question
)
# A paper's title ("1978年普通高等学校招生全国统一考试"): short, no heading, no question, no instruction.
TITLE = re.compile(r"考试|试卷|试题|测试|练习|招生|高考|学年|学期")


@dataclass
class ParsedQuestion:
    number: int
    section: int
    qtype: str
    lines: list[Line] = field(default_factory=list)
    stem: list[str] = field(default_factory=list)
    options: list[dict] = field(default_factory=list)
    answer: str = ""
    solution: str = ""
    part: str = "stem"  # where the next line goes: stem, option, answer or solution
    scope: str = ""  # the section numeral where numbering restarts per section ("二" of 二.3)
    name: str = ""  # the label of a question without a number (a section that is one question: "五")
    sub_seen: bool = False  # a sub-question (1) has started in the stem
    options_in_part: bool = False  # the options belong to a sub-question: the question itself is no choice
    maybe_a: tuple[int, bool] | None = None  # where a stem line that may be option A misread starts
    # How sure the cut is: 1 for a number that follows on; less after a jump, for a question known only
    # by its numeral or badge; lowered again where the report flags it (consistency_report).
    confidence: float = 1.0
    shared: str = ""  # material it shares with the questions next to it, also at the start of its text
    numbered_choices: bool = False  # its options were printed (1)…(4) and lettered A-D here
    by_numeral: bool = False  # known only by its section numeral (一、已知…), in a paper numbered no other way

    @property
    def label(self) -> str:
        """The question's number as a person cites it: "7", or "二.3" where numbers restart per section."""
        if self.name:
            return self.name
        return f"{self.scope}.{self.number}" if self.scope else str(self.number)

    @property
    def option_count(self) -> int:
        return len(self.options)

    @property
    def text(self) -> str:
        return "".join(self.stem).strip()

    @property
    def answers(self) -> list[str]:
        return split_answer(self.answer, self.qtype)


@dataclass
class SharedStem:
    """Material that introduces the questions ``first`` to ``last`` (a passage, an experiment)."""

    first: int
    last: int
    lines: list[Line] = field(default_factory=list)
    open: bool = True  # still reading it: the first question it introduces has not started

    @property
    def text(self) -> str:
        parts: list[str] = []
        for line in self.lines:
            join_line(parts, line.text.strip())
        return "".join(parts).strip()


@dataclass
class AnswerEntry:
    number: int
    text: list[str] = field(default_factory=list)
    scope: str = ""  # the section numeral of an answer section that restarts its numbers (二、(1)[B] (2)[C])


@dataclass
class Segmented:
    questions: list[ParsedQuestion]
    warnings: list[str]  # the notes of ``report`` in English, for logs and the command line
    answers_key: tuple | None = None  # where the answer section starts, in reading order
    report: dict = field(default_factory=dict)  # the paper's consistency report

    @property
    def notes(self) -> list[Note]:
        """Everything the paper's reading is unsure of, as codes with parameters (annotation.pdf.notes)."""
        return list(self.report.get("notes", []))


def _instructed_type(heading: str) -> str | None:
    """A heading that names no type says what to do: 选出…答案 is choice, 写在横线上 is fill-in."""
    if re.search(r"选出|选项|字母", heading):
        return QuestionType.MULTIPLE_CHOICE
    if re.search(r"横线|填在|填写在题中", heading):
        return QuestionType.FILL_IN_BLANK
    return None


def section_type(title: str) -> str | None:
    for words, qtype in SECTION_TYPES:
        if any(word in title for word in words):
            return qtype
    return None


class Segmenter:
    def __init__(self, *, default_type: str | None = None) -> None:
        self.questions: list[ParsedQuestion] = []
        self.entries: list[AnswerEntry] = []
        # What the reading is unsure of, with the questions next to it (they get a flag).
        self.notes: list[tuple[Note, list[ParsedQuestion]]] = []
        self.numbered: dict[int, int] = {}  # page -> lines starting with a number, outside notice and answers
        self.text_chars = 0  # characters read outside the answers: a paper of text with no question is said
        self.stated_missing: list[tuple[int, int]] = []  # "缺第2-4题": numbers the paper says it lacks
        self.title_before = self.after_title = False
        self.next_number: int | None = None  # the number of the next numbered line (segment() looks ahead)
        self.following: dict[int, int | None] = {}
        self.badge: tuple[int, Line] | None = None  # a question number printed alone, in a badge, on its line
        self.key_numbers: list[int] | None = None  # an answer table's 题号 row, waiting for its 答案 row
        self.key_letters: list[str] = []
        self.jumped = False  # the question being started comes after a jump in the numbering
        self.shared: list[SharedStem] = []  # material introducing several questions ("回答23-27题")
        self.qtype = default_type
        self.section = 0
        self.in_answers = False
        self.current: ParsedQuestion | None = None
        self.entry: AnswerEntry | None = None
        self.answers_key: tuple | None = None
        self.answer_scope = ""
        self.answer_style: str | None = None  # how the answers of the section being read are numbered
        self.stated: dict[int, tuple[str, int | None]] = {}  # section -> (heading, "共 8 小题" count)
        # (page, column) -> characters read into no question there, and the question read before them
        self.leftover: dict[tuple[int, int], tuple[int, ParsedQuestion]] = {}
        self.in_notice = False
        self.notice_last = 0  # the last point number of the notice being read
        self.typed_sections = 0  # headings such as 一、选择题 seen: the document is an exam paper
        self.numeral = ""  # the numeral of the section being read
        self.bracketed: set[int] = set()  # ids of lines whose （n） numbers a question (numbering.py)
        self.badges: set[int] = set()  # ids of lone numbers running on, each heading a line (numbering.py)

    def feed(self, line: Line) -> None:
        text = line.text.strip()
        if id(line) in self.following:
            self.next_number = self.following[id(line)]
        if self.in_answers and self._key_table(text):
            return
        if self.badge is not None:
            line, text = self._after_badge(line, text)
        if self._is_badge(line, text):
            return
        # Whether the line before was a paper's title: answers printed under the title again start there.
        self.after_title, self.title_before = self.title_before, _is_title(text)
        if said := SAID_MISSING.search(text):
            first = int(said.group(1) or said.group(3))
            last = int(said.group(2) or said.group(4) or first)
            if first <= last <= first + 40 and (first, last) not in self.stated_missing:
                self.stated_missing.append((first, last))
        if NOTICE.match(text) and not self.in_answers:
            self.in_notice, self.current, self.notice_last = True, None, 0
            return
        # A scan's heading may be spaced out ("答 案", "参 考 答 案"): the words are read without the spaces.
        spaced = re.sub(r"\s+", "", text)
        if ANSWER_SECTION.search(spaced) and len(text) <= 30 and not NUMBER.match(text) and not INTRODUCES.search(text):
            self.in_answers, self.current, self.entry = True, None, None
            self.answers_key = self.answers_key or line.key
            return
        section = SECTION.match(text) or (None if self.in_answers else BARE_SECTION.match(text))
        if section and self.in_answers and (section.group(1) or section.group(2)) in self._scopes():
            section = None  # "七、第1小题：…": the answers to section 七, no heading
        if (section and not self.in_answers and section.group(2) and section_type(section.group(3)) is None
                and self.questions and self._next_item(section.group(2))):  # fmt: skip
            # "二、已知命题 p1：…" in a paper numbered by numerals: a question whose words end in 题, no heading.
            section = None
        if section:
            self.section += 1
            self.current, self.in_notice = None, False
            self.numeral = section.group(1) or section.group(2) or ""
            stated = STATED_COUNT.search(text)
            self.stated[self.section] = (text[:40], int(stated.group(1) or stated.group(2)) if stated else None)
            if not self.in_answers:
                # A section of another kind (判断题) has its questions' types guessed one by one.
                self.qtype = section_type(section.group(3)) or _instructed_type(text)
                self.typed_sections += self.qtype is not None
            return
        single = UNNUMBERED.match(text)
        if single and not self.in_answers and not self.in_notice and not re.search(r"小题|每题|题有|各题", text):
            # 五、（6 分）以初速… : a section that is one question, known by its numeral.
            self.section += 1
            last = self.questions[-1].number if self.questions else 0
            self.current = ParsedQuestion(number=last + 1, section=self.section, qtype=QuestionType.FREE_RESPONSE)
            self.current.name = single.group(1)
            self.questions.append(self.current)
            self.current.lines.append(line)
            add_text(self.current, single.group(2))
            return
        item = CN_ITEM.match(text)
        if item and not self.in_answers and self._next_item(item.group(1)):
            # 一、已知… 解：… : a paper numbered only by section numerals, each a whole question (it ends the
            # notice numbered 1．2．3． before it).
            self.section, self.in_notice = self.section + 1, False
            last = self.questions[-1].number if self.questions else 0
            self.current = ParsedQuestion(number=last + 1, section=self.section, qtype=QuestionType.FREE_RESPONSE)
            self.current.name, self.current.confidence, self.current.by_numeral = item.group(1), 0.8, True
            self.questions.append(self.current)
            self.current.lines.append(line)
            add_text(self.current, item.group(2))
            return
        if self.current is None and self.section and self.qtype is None and not self.in_answers:
            # The heading's instructions go on over its next lines (…每小题3分。每小 / 题选出一个正确的答案).
            self.qtype = _instructed_type(text)
            self.typed_sections += self.qtype is not None
        if self.in_answers and self._scoped_answers(text):
            return
        if self.in_answers and self._choice_run(text):
            return
        if self.in_answers and len(pieces := answer_pieces(text)) > 1:
            for piece in pieces:  # "14．D 15．AD 16．CD": a key on one line
                self.feed(Line(piece, line.bbox, line.page, line.key))
            return
        number = self._number(line, text)
        if not number and not self.in_answers and self._opens_shared(text):
            # A notice's points say how to answer, never which questions to read something for: material
            # for questions (阅读下列材料，回答1~3题) ends the notice before it.
            self.in_notice = False
            self.shared[-1].lines.append(line)
            return
        if number and not self.in_answers and self._answers_begin(int(number.group(1)), text[number.end() :]):
            # No heading, but the numbering starts again with answers ("15.C【解析】…"): an answer section.
            self.in_answers, self.current, self.entry, self.in_notice = True, None, None, False
            self.answers_key = self.answers_key or line.key
            self.feed(line)
            return
        if not self.in_answers:
            self.text_chars += len(text)
        if self.in_notice:
            # The notice ends at a heading, or where the numbering starts again ("1．" after its "1．2．3．").
            value = int(number.group(1)) if number else None
            follows = bool(self.questions) and value == self.questions[-1].number + 1
            if value is None or (value == self.notice_last + 1 and not follows):
                self.notice_last = value or self.notice_last
                return
            self.in_notice = False
        # Steps of a worked solution ("1." "2." after 【解析】) are not counted.
        stepping = self.current is not None and self.current.part not in ("stem", "option")
        if number and not self.in_answers and not self.in_notice and not stepping:
            self.numbered[line.page] = self.numbered.get(line.page, 0) + 1
        if number and self._starts_item(int(number.group(1)), text[number.end() :]):
            text = text[number.end() :]
            self._start(int(number.group(1)), line)
        if self.in_answers:
            if self.entry is not None:
                self._add_to_entry(self.entry, text)
        elif self.current is None and self.shared and self.shared[-1].open and not self.in_notice:
            self.shared[-1].lines.append(line)  # the shared material, up to its first question
        elif self.current is None and self.questions and not self.in_notice:
            where = (line.page, line.key[2] if len(line.key) > 2 else 0)
            chars, before = self.leftover.get(where, (0, self.questions[-1]))
            self.leftover[where] = (chars + len(text), before)
        elif self.current is not None:
            self.current.lines.append(line)
            add_text(self.current, text)

    def _number(self, line: Line, text: str) -> re.Match | None:
        """The question (or answer) number a line starts with: ``1．``, or ``（1）`` in a paper numbered so."""
        if number := NUMBER.match(text):
            return number
        # OCR reads a scan's "4．" as "4：" or "4，" now and then: taken only for the next question's number.
        misread = MISREAD_NUMBER.match(text)
        if misread and not self.in_answers and self.current and int(misread.group(1)) == self.current.number + 1:
            return misread
        if id(line) in self.bracketed or (self.in_answers and self.bracketed):
            return PAREN_NUMBER.match(text)
        return None

    def _add_to_entry(self, entry: AnswerEntry, text: str) -> None:
        # Sub-answers and 【】 parts start on their own line; wrapped lines join.
        if entry.text and (SUB_QUESTION.match(text) or MARKER.match(text)):
            entry.text.append("\n")
        join_line(entry.text, text)

    def _scopes(self) -> set[str]:
        """The numerals of sections whose numbers restart, and of sections that are one question."""
        return {q.scope for q in self.questions if q.scope} | {q.name for q in self.questions if q.name}

    def _scoped_answers(self, text: str) -> bool:
        """Answers by section where numbers restart: "二、(1)[B](2)[C]", "七、第1小题：…" for a question 七."""
        scoped = self._scopes()
        if not scoped:
            return False
        heading = re.match(rf"^([{CN_NUMERAL}]+)\s*[、．.]\s*", text)
        if heading and heading.group(1) in scoped:
            self.answer_scope, self.answer_style = heading.group(1), None
            text = text[heading.end() :]
            if any(q.name == self.answer_scope for q in self.questions):
                self.entry = AnswerEntry(0, [text], scope=self.answer_scope)
                self.entries.append(self.entry)
                return True
        elif not self.answer_scope:
            return False
        items = self._answer_items(text)
        if items and items[0].start() > 0 and self.entry is not None and self.entry.number:
            # "是0的正弦曲线。 (6)大于2的正整数。": the end of one answer, then the next ones.
            following = [m for m in items if item_number(m) > self.entry.number]
            if following and item_number(following[0]) == self.entry.number + 1:
                self._add_to_entry(self.entry, text[: following[0].start()].strip())
                text = text[following[0].start() :]
                items = self._answer_items(text)
        if not items or items[0].start() > 0:
            if self.entry is not None:
                self._add_to_entry(self.entry, text)
            return True
        if self.entry is not None and self.entry.number == 0 and self.entry.scope == self.answer_scope:
            self._add_to_entry(self.entry, text)  # the sub-answers of a one-question section
            return True
        ends = [m.start() for m in items[1:]] + [len(text)]
        for match, end in zip(items, ends, strict=True):
            self.entry = AnswerEntry(item_number(match), [text[match.end() : end].strip()], scope=self.answer_scope)
            self.entries.append(self.entry)
        return True

    def _answer_items(self, text: str) -> list[re.Match]:
        """Where the answers of a section start: numbered as its first answer is, "(1)" or "1."; in a
        section answered "1. … (1) … (2) …" the bracketed numbers are the parts of one answer."""
        items = list(SCOPED_ITEM.finditer(text))
        if items and self.answer_style is None:
            self.answer_style = "paren" if items[0].group(1) else "dot"
        kept = [m for m in items if ("paren" if m.group(1) else "dot") == self.answer_style]
        return later_dot_items(text, kept) if self.answer_style == "dot" else kept

    def _choice_run(self, text: str) -> bool:
        run = CHOICE_RUN.match(text)
        if not run or int(run.group(2)) - int(run.group(1)) + 1 != len(run.group(3)):
            return False
        for offset, letter in enumerate(run.group(3)):
            self.entries.append(AnswerEntry(int(run.group(1)) + offset, [letter]))
        self.entry = None
        return True

    def _starts_item(self, number: int, rest: str = "") -> bool:
        """Only a number that follows on starts a question, so "2." inside a solution does not."""
        if self.in_answers:
            # A second pass over the numbers (a key, then worked solutions) starts again at the first.
            first = self.entries[0].number if self.entries else None
            return self.entry is None or number > self.entry.number or (number == first and number < self.entry.number)
        last = self.questions[-1].number if self.questions else None
        current = self.current
        if current is not None and current.name and number == current.number and _heading_only(current):
            # "二、(10分)" then "6．…": the numeral headed a section whose questions are numbered on, it was
            # no question of its own. Its type is unknown: each question's is guessed.
            self.questions.remove(current)
            self.current, self.qtype = None, None
            return True
        if last is None or number == last + 1 or (self.current is None and number == 1):
            return True
        if all(q.by_numeral for q in self.questions):
            return False  # a paper numbered 一、二、 alone: "3 .故选" in a worked solution is no question
        if number < last and self._repeats(number, rest):
            return True  # the paper again, now with its answers: matched back in result()
        if number > last and (self.current is None or SCORE_PREFIX.match(rest)) and number <= last + 40:
            return True  # after a heading, or "25．（17 分）": a 理综 paper's part goes on with its own numbers
        solving = current is not None and current.part in ("answer", "solution")
        if last + 1 < number <= last + 1 + MAX_SKIPPED and (not solving or self.next_number == number + 1):
            self._say(note("skipped", missing=_span(last + 1, number - 1), next=number), self.questions[-1])
            self.jumped = True
            return True
        if last + 1 < number and self._said_missing(last + 1, number - 1):
            return True  # "缺第2-4题": the paper said so, 5 is the next question, not a step of 1
        if (
            last + 1 < number <= last + MAX_JUMP
            and self.next_number == number + 1
            and (self.current is None or self.current.part in ("stem", "option"))
        ):
            # Questions missing from the file (1, then 5, 6, 7): the numbering goes on from the new number,
            # so it is the next question, not a step of the one before. Said, with a lower confidence.
            self._say(note("skipped", missing=_span(last + 1, number - 1), next=number), self.questions[-1])
            self.jumped = True
            return True
        return False

    def _answers_begin(self, number: int, rest: str) -> bool:
        """The first question's number again, followed by an answer rather than the question's text."""
        if not self.questions or number >= self.questions[-1].number:
            return False
        first = next((q for q in self.questions if not q.name), None)
        if first is None or number != first.number:
            return False
        if ANSWER_LIKE.match(rest):
            return True
        # Under a title again ("1978年…全国统一考试"), the numbers restart with short answers ("1. 磁通量；…"):
        # a separate answer section whose first answer is no choice letter.
        return self.after_title and len(rest) <= 40 and not self._repeats(number, rest)

    def _repeats(self, number: int, rest: str) -> bool:
        """A number seen before whose text starts as that question's did: a copy of the paper."""
        head = opening(rest)
        return len(head) >= 6 and any(q.number == number and opening(q.text) == head for q in self.questions)

    def _start(self, number: int, line: Line) -> None:
        if self.in_answers:
            self.entry = AnswerEntry(number)
            self.entries.append(self.entry)
            return
        self.current = ParsedQuestion(number=number, section=self.section, qtype=self.qtype or "")
        self.current.scope = self.numeral
        if self.jumped:
            self.current.confidence, self.jumped = 0.6, False  # a cut after numbers that are not there
        if self.shared and self.shared[-1].open and number >= self.shared[-1].first:
            self.shared[-1].open = False
        self.questions.append(self.current)

    def result(self) -> Segmented:
        self.questions, self.answers_key = merge_copies(self.questions, self.answers_key)
        scope_numbers(self.questions)
        for question in self.questions:
            numbered_options(question)
            for unread in fill_option_gaps(question):
                self._say(unread, question)
        for question, unread in numbered_picture_options(self.questions):
            self._say(unread, question)
        for question in self.questions:
            if not question.qtype:
                question.qtype = guess_type(question)
            elif question.qtype == QuestionType.MULTIPLE_CHOICE and SCORE_PREFIX.match(question.text):
                # A choice section scores its items in the heading; "（12 分）" on an item marks a lab or
                # calculation question set after them without a heading of its own.
                question.qtype = guess_type(question, options=False)
            elif question.qtype != QuestionType.MULTIPLE_CHOICE and own_choice(question):
                # Four options of its own, asked as a choice, in a section of another type (a 非选择题 part
                # that holds a choice, an 实验题 with A-D): it is a choice question.
                question.qtype = QuestionType.MULTIPLE_CHOICE
        # Before the checks below: an answer section shows a paper is an exam.
        self.notes += match_answers(self.questions, self.entries)
        by_numeral = [q for q in self.questions if q.by_numeral]
        if by_numeral and len(by_numeral) == len(self.questions):
            # Numbered by numerals alone, a paper shows each question's 解 (after it, or in an answer
            # section by the same numerals), or its items ask: a syllabus or a report numbers its headings
            # so too, and asks nothing.
            solved = sum(1 for q in by_numeral if q.solution or q.answer or ASKS.search(q.text))
            if solved < max(1, (len(by_numeral) + 1) // 2):
                self.questions, self.entries = [], []
                self.notes = [(note("not_exam"), [])]
        if self.questions and not self.typed_sections and not _looks_like_exam(self.questions):
            self.questions, self.entries = [], []
            self.notes = [(note("not_exam"), [])]
        elif not self.questions and self.text_chars >= LEFTOVER_CHARS and not self._said("not_exam"):
            self._say(note("no_questions", chars=self.text_chars))
        self._attach_shared()
        self._uncut_pages()
        report = consistency_report(self.questions, self.stated, self.leftover, notes=self.notes,
                                    said_missing=self.stated_missing)  # fmt: skip
        return Segmented(self.questions, [english(n) for n in report["notes"]], self.answers_key, report)

    def _opens_shared(self, text: str) -> bool:
        """Material several questions share ("阅读下列材料，回答23-27题"), from the next question on."""
        intro = SHARED_STEM.search(text)
        if not intro:
            return False
        first = int(intro.group(1) or intro.group(3) or intro.group(5))
        last = int(intro.group(2) or intro.group(4) or intro.group(5))
        expected = self.questions[-1].number + 1 if self.questions else first
        if not first <= last <= first + 20 or first != expected:
            return False
        if self.shared:
            self.shared[-1].open = False
        self.current = None
        self.shared.append(SharedStem(first, last))
        return True

    def _next_item(self, numeral: str) -> bool:
        """一、 starts a paper numbered by numerals only when nothing is numbered yet; then 二、, 三、 in turn."""
        if any(not q.name for q in self.questions):
            return False
        named = [q.name for q in self.questions if q.name]
        wanted = cn_value(named[-1]) + 1 if named else 1
        return cn_value(numeral) == wanted

    def _is_badge(self, line: Line, text: str) -> bool:
        """A number alone on its line, where the next question's number is due, at the column's left edge:
        the badge a question's number is printed in. The text on the next line is that question's."""
        if not BADGE.match(text) or self.in_answers:
            return False
        if self.in_notice and id(line) not in self.badges:
            return False  # a notice's points are numbered on their own lines, never in a run of badges
        value = int(text)
        last = self.questions[-1].number if self.questions else 0
        if value != last + 1 and not (not self.questions and id(line) in self.badges):
            return False  # the first badge may number past 1 (a paper's second part): known by its run
        current = self.current or ParsedQuestion(0, 0, "")
        # Centred in a badge about a character wide at the column's edge; further in, inside the text (a
        # fraction's denominator on a line of its own), it is text.
        reach = 2 + 1.2 * max(0.0, line.bbox[3] - line.bbox[1])
        column = [ln.bbox[0] for ln in current.lines if ln.key[:1] + ln.key[2:3] == line.key[:1] + line.key[2:3]]
        if column and line.bbox[0] > min(column) + reach:  # the lines of its column, not the column before
            return False
        self.badge, self.in_notice = (value, line), False
        return True

    def _after_badge(self, line: Line, text: str) -> tuple[Line, str]:
        assert self.badge is not None
        value, badge = self.badge
        self.badge = None
        if NUMBER.match(text) or not text:
            return line, text
        joined = Line(f"{value}．{text}", union_box(badge.bbox, line.bbox), line.page, min(badge.key, line.key))
        return joined, joined.text

    def _key_table(self, text: str) -> bool:
        """An answer key set as a table: a 题号 row of numbers and an 答案 row of letters, each row on one
        line or each cell on a line of its own ("题号", "13", "14", …, "答案", "B", "B", …)."""
        numbers = KEY_NUMBERS.match(text)
        if numbers:
            found = [int(n) for n in re.findall(r"\d{1,3}", numbers.group(1) or numbers.group(2) or "")]
            if any(b <= a for a, b in zip(found, found[1:], strict=False)):
                return False
            self.key_numbers, self.key_letters = found, []
            return True
        if self.key_numbers is None:
            return False
        if LONE_NUMBER.match(text) and not self.key_letters:
            value = int(text.strip())
            if self.key_numbers and value <= self.key_numbers[-1]:
                self.key_numbers = None
                return False
            self.key_numbers.append(value)
            return True
        letters = KEY_LETTERS.match(text)
        if not letters:
            self.key_numbers = None
            return False
        self.key_letters += re.findall(r"[A-H]{1,4}", letters.group(1) or "")
        if len(self.key_letters) >= len(self.key_numbers):
            for number, answer in zip(self.key_numbers, self.key_letters, strict=False):
                self.entries.append(AnswerEntry(number, [answer]))
            self.key_numbers, self.key_letters, self.entry = None, [], None
        return True

    def _attach_shared(self) -> None:
        """Shared material goes with each question it introduces, before the question's own text; the
        report says which (a person sees it repeated on each)."""
        for shared in self.shared:
            text = shared.text
            members = [q for q in self.questions if shared.first <= q.number <= shared.last and not q.name]
            if not text or not members:
                continue
            for question in members:
                question.shared = text
                question.stem[:0] = [text, "\n"]
            self._say(note("shared_stem", first=shared.first, last=shared.last))

    def _said(self, code: str) -> bool:
        return any(said["code"] == code for said, _ in self.notes)

    def _say(self, said: Note, *near: ParsedQuestion) -> None:
        self.notes.append((said, list(near)))

    def _said_missing(self, first: int, last: int) -> bool:
        return any(a <= first and last <= b for a, b in self.stated_missing)

    def _uncut_pages(self) -> None:
        """A page with numbered lines from which no question was cut (OCR that lost the numbers' dots, a
        layout read out of order): said, with the questions read before and after it flagged."""
        if not self.questions:
            return  # a paper with no question at all is said once (not_exam, no_questions), not page by page
        cut = {q.lines[0].page for q in self.questions if q.lines}
        for page, count in sorted(self.numbered.items()):
            if count < 2 or page in cut:
                continue
            before = [q for q in self.questions if q.lines and q.lines[0].page < page]
            after = [q for q in self.questions if q.lines and q.lines[0].page > page]
            near = ([before[-1]] if before else []) + ([after[0]] if after else [])
            self._say(note("page_uncut", page=page, numbers=count), *near)


def cn_value(numeral: str) -> int:
    """一 -> 1, 十二 -> 12, 二十 -> 20 (the section numerals of a paper)."""
    digits = [CN_NUMERAL.index(c) + 1 for c in numeral if c in CN_NUMERAL]
    if not digits:
        return 0
    if len(digits) == 1:
        return digits[0]
    if digits[0] == 10:  # 十二
        return 10 + digits[1]
    return digits[0] * 10 + (digits[2] if len(digits) > 2 else 0)  # 二十, 二十三


def _is_title(text: str) -> bool:
    return (
        len(text) <= 40
        and bool(TITLE.search(text))
        and not NUMBER.match(text)
        and not re.match(rf"^第?[{CN_NUMERAL}]+\s*[、．.:：部大]", text)
        and not re.search(r"小题|每题|[,，。；;]", text)
    )


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _heading_only(question: ParsedQuestion) -> bool:
    """A question known by its numeral that holds a heading's worth of text and nothing else."""
    return len(question.text.strip()) <= 30 and not question.options and not question.solution


def union_box(a: tuple, b: tuple) -> tuple:
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


ASKS = re.compile(
    r"_{2,}|＿|[(（]\s*[)）]|[？?]|(?:^|[，,。；;：:\s)）])(?:求|试求|计算)|多大|多少|[(（]\s*\d{1,2}\s*分\s*[)）]"
    r"|请\s*(?:写出|说明|计算|证明|判断|回答|画出|求出|解答)"
)


def _looks_like_exam(questions: list[ParsedQuestion]) -> bool:
    """Numbered clauses of a regulation or a syllabus are no questions: an exam has options, blanks, (  ),
    or questions asked (求：, (1)求…, 多大, ？) or scored ((10分)). An old paper whose blanks are spaces
    (outlined text keeps no underline) is known by the last two."""
    if not questions:
        return False
    marked = sum(1 for q in questions if len(q.options) >= 2 or q.answer or q.solution or ASKS.search(q.text))
    return marked >= max(1, (len(questions) + 1) // 2)


def segment(lines: list[Line], *, default_type: str | None = None) -> Segmented:
    segmenter = Segmenter(default_type=default_type)
    segmenter.bracketed, segmenter.badges = bracketed_questions(lines), badge_runs(lines)
    following: int | None = None
    for line in reversed(lines):  # each line's next numbered line: a jump the numbering goes on from is real
        segmenter.following[id(line)] = following
        if number := segmenter._number(line, line.text.strip()):
            following = int(number.group(1))
    for line in lines:
        segmenter.feed(line)
    return segmenter.result()
