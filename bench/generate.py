r"""Synthetic K12Vista data at the paper's scale, for benchmarks and tests.

    python -m bench.generate --scale 1.0 --out /tmp/k12 [--seed 0] [--only questions,pem,pebench]

Scale 1.0 is the paper's size: 33,660 benchmark questions (with images), 840,175 PEM-800K
training records and 3,033 PEBench items. Every count scales linearly (rounded, at least 1).

The records follow the reference release formats (shared/PIPELINE.md, "The data"); the content is
synthetic but shaped like the real thing: Chinese text with inline LaTeX, base64 JPEG figures of
realistic sizes, about 3.24 sub-answers a question, about 5 solution steps, about 6 chain-of-thought
steps a PEM record, and a step-label mix that is mostly ``CS``.

Design choices:

- Every record is a pure function of (seed, stream, index): each one gets its own ``random.Random``
  seeded from a hash of those three. Output is therefore deterministic, records can be rebuilt one
  at a time (a PEM record rebuilds the text of the question it refers to instead of keeping all
  questions in memory), and nothing is held beyond the record being written.
- Figures are drawn fresh for every question rather than cut from a cache of pre-rendered ones.
  Measured with Pillow 13: drawing a figure takes about 0.5 ms and the JPEG encode about 1 ms,
  while resizing a cached base image to a new size costs about 5 ms; a cache would save little,
  cost a few hundred MB, and make images repeat (which would defeat any dedup-by-hash filter a
  benchmark wants to time).
- Only the standard library and Pillow, so later ``bench/`` scripts can import the ``iter_*``
  functions without a database or Django settings.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import math
import os
import random
import string
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache, lru_cache

from PIL import Image, ImageDraw, ImageFont

from k12vista.vocabulary import (
    LABEL_CODES,
    QUESTION_TYPE_ZH,
    RELEASE_TAGS,
    QuestionType,
    Stage,
    Subject,
    parse_release_tag,
)

# --------------------------------------------------------------------------------------------
# Scale
# --------------------------------------------------------------------------------------------

# The paper's sizes (PIPELINE.md): benchmark questions, PEM-800K records, PEBench items.
PAPER_COUNTS = {"questions": 33_660, "pem": 840_175, "pebench": 3_033}
FILE_NAMES = {"questions": "questions.jsonl", "pem": "pem.jsonl", "pebench": "pebench.jsonl"}


def counts_for_scale(scale: float) -> dict[str, int]:
    """Record counts for a scale factor: linear in the paper's sizes, rounded, at least 1 each."""
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    return {name: max(1, round(count * scale)) for name, count in PAPER_COUNTS.items()}


def _rng(seed: int, stream: str, index: int) -> random.Random:
    """An independent generator per record, so any record can be rebuilt on its own."""
    digest = hashlib.blake2b(f"{seed}:{stream}:{index}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def question_hash_id(seed: int, index: int) -> str:
    """Stable 32-hex id of question ``index`` for ``seed`` (the reference files use hex ids too)."""
    return hashlib.sha256(f"k12vista-synthetic:{seed}:{index}".encode()).hexdigest()[:32]


# --------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------


class _Tpl(string.Template):
    """``@name`` placeholders, because ``$`` is LaTeX's math delimiter and ``{}`` its grouping."""

    delimiter = "@"


@cache
def _template(text: str) -> _Tpl:
    return _Tpl(text)


def _fill(text: str, params: dict[str, str]) -> str:
    return _template(text).substitute(params)


_TAGS_BY_SUBJECT = {
    subject: [tag for tag in RELEASE_TAGS if parse_release_tag(tag)[0] == subject] for subject in Subject
}
_GRADE_RANGE = {Stage.PRIMARY: (1, 6), Stage.MIDDLE: (7, 9), Stage.HIGH: (10, 12)}

_TYPES = (QuestionType.MULTIPLE_CHOICE, QuestionType.FILL_IN_BLANK, QuestionType.FREE_RESPONSE)

# Knowledge points are "topic·aspect"; topics depend on the stage, so a grade-3 item never gets
# a high-school topic. 36 x 10 = 360 points for math, 24 x 10 = 240 for the other subjects.
_TOPICS = {
    (Subject.MATH, Stage.PRIMARY): (
        "分数的意义", "小数乘法", "长方形面积", "圆的周长", "比和比例", "统计图表",
        "简易方程", "百分数应用", "三角形内角和", "长方体体积", "鸡兔同笼", "行程问题",
    ),
    (Subject.MATH, Stage.MIDDLE): (
        "一元二次方程", "一次函数", "反比例函数", "二次函数", "全等三角形", "相似三角形",
        "勾股定理", "圆的切线", "锐角三角函数", "平行四边形", "数据的分析", "概率初步",
    ),
    (Subject.MATH, Stage.HIGH): (
        "集合与逻辑", "函数的单调性", "指数函数", "对数函数", "三角恒等变换", "解三角形",
        "等差数列", "等比数列", "平面向量", "立体几何", "圆锥曲线", "导数的应用",
    ),
    (Subject.PHYSICS, Stage.MIDDLE): (
        "光的反射", "光的折射", "凸透镜成像", "密度", "压强", "浮力",
        "杠杆", "滑轮组", "欧姆定律", "电功率", "串并联电路", "比热容",
    ),
    (Subject.PHYSICS, Stage.HIGH): (
        "匀变速直线运动", "牛顿运动定律", "曲线运动", "万有引力", "机械能守恒", "动量守恒",
        "电场强度", "电势能", "闭合电路欧姆定律", "磁场", "电磁感应", "交变电流",
    ),
    (Subject.CHEMISTRY, Stage.MIDDLE): (
        "空气的组成", "氧气的制取", "水的电解", "质量守恒定律", "化学方程式", "碳和碳的氧化物",
        "金属活动性", "溶解度曲线", "溶质质量分数", "酸碱中和", "盐的性质", "化学肥料",
    ),
    (Subject.CHEMISTRY, Stage.HIGH): (
        "物质的量", "氧化还原反应", "离子反应", "元素周期律", "化学键", "化学反应速率",
        "化学平衡", "电离平衡", "盐类水解", "原电池", "电解池", "有机物的结构",
    ),
    (Subject.BIOLOGY, Stage.MIDDLE): (
        "细胞的结构", "显微镜的使用", "光合作用", "呼吸作用", "蒸腾作用", "消化和吸收",
        "血液循环", "神经调节", "生态系统", "食物链", "遗传和变异", "传染病预防",
    ),
    (Subject.BIOLOGY, Stage.HIGH): (
        "细胞膜的结构", "酶的特性", "ATP", "有丝分裂", "减数分裂", "基因分离定律",
        "自由组合定律", "伴性遗传", "DNA复制", "基因表达", "种群数量变化", "能量流动",
    ),
    (Subject.GEOGRAPHY, Stage.MIDDLE): (
        "经纬网", "地图比例尺", "等高线地形图", "气温分布", "降水分布", "气候类型",
        "地球自转", "地球公转", "人口分布", "农业区位", "河流水文", "板块构造",
    ),
    (Subject.GEOGRAPHY, Stage.HIGH): (
        "太阳高度角", "昼夜长短", "大气受热过程", "热力环流", "气压带风带", "锋面系统",
        "水循环", "洋流", "地质作用", "自然带", "城市化", "工业区位",
    ),
}  # fmt: skip

_ASPECTS = (
    "概念辨析", "图像分析", "规律应用", "综合计算", "实验探究",
    "实际应用", "易错辨析", "数形结合", "推理论证", "信息提取",
)  # fmt: skip


def knowledge_point_pool(subject: Subject) -> list[str]:
    """All synthetic knowledge points of a subject (a few hundred)."""
    return [f"{topic}·{aspect}" for (subj, _), topics in _TOPICS.items() if subj == subject
            for topic in topics for aspect in _ASPECTS]  # fmt: skip


# Question stems, each with the kind of figure it points at (drawn by render_figure).
_STEMS = {
    Subject.MATH: (
        ("curve", r"如图，抛物线 $y=x^2@{bs}x@{cs}$ 与 $x$ 轴交于 $A$、$B$ 两点，与 $y$ 轴交于点 $C$。"),
        ("geometry", r"如图，在 $\triangle ABC$ 中，$AB=AC=@a$，$\angle BAC=@{deg}^\circ$，$D$ 为 $BC$ 的中点。"),
        ("geometry", r"如图，$\odot O$ 的半径为 $@a$，$AB$ 是 $\odot O$ 的直径，点 $C$ 在圆上，$BC=@b$。"),
        ("bar", r"某校随机抽取 $@n$ 名学生统计课外阅读时间，结果如图所示。"),
        ("curve", r"如图，直线 $y=@{k}x@{bs}$ 与双曲线 $y=\frac{@m}{x}$ 交于 $A$、$B$ 两点。"),
        ("curve", r"已知函数 $f(x)=\frac{@a}{x}+@b\ln x$，其部分图像如图所示。"),
        ("geometry", r"如图，在四边形 $ABCD$ 中，$AB\parallel CD$，$AB=@a$，$CD=@b$，$\angle B=@{deg}^\circ$。"),
    ),
    Subject.PHYSICS: (
        ("diagram", r"如图所示的电路中，电源电压为 $@u\,\mathrm{V}$，定值电阻 $R_1=@a\,\Omega$，"
                    r"滑动变阻器 $R_2$ 的最大阻值为 $@n\,\Omega$。"),
        ("diagram", r"如图所示电路，闭合开关 $S$ 后，电流表的示数为 $0.@{a}\,\mathrm{A}$，"
                    r"电压表的示数为 $@u\,\mathrm{V}$。"),
        ("geometry", r"如图，质量为 $m=@a\,\mathrm{kg}$ 的物块静止在倾角为 $@{deg}^\circ$ 的斜面上。"),
        ("curve", r"一辆小车做匀变速直线运动，其 $v-t$ 图像如图所示，初速度 $v_0=@b\,\mathrm{m/s}$。"),
        ("geometry", r"如图，用滑轮组将重 $@n\,\mathrm{N}$ 的物体在 $@c\,\mathrm{s}$ 内匀速提升 $@a\,\mathrm{m}$。"),
        ("geometry", r"如图所示，一束光从空气斜射入水中，入射角为 $@{deg}^\circ$。"),
        ("bar", r"某小组测量了不同材料的比热容，实验数据如图所示，加热时间均为 $@c\,\mathrm{min}$。"),
    ),
    Subject.CHEMISTRY: (
        ("curve", r"如图是甲、乙两种固体物质的溶解度曲线，$t_1\,^\circ\mathrm{C}$ 时甲的溶解度为 $@a\,\mathrm{g}$。"),
        ("diagram", r"实验室用如图所示装置制取氧气，取 $@a\,\mathrm{g}$ 氯酸钾与 $@b\,\mathrm{g}$ 二氧化锰混合加热。"),
        ("curve", r"向 $@n\,\mathrm{g}$ 稀盐酸中逐滴加入氢氧化钠溶液，溶液 $\mathrm{pH}$ 的变化如图所示。"),
        ("curve", r"在 $@c\,\mathrm{L}$ 密闭容器中发生反应 $\mathrm{N_2+3H_2\rightleftharpoons 2NH_3}$，"
                  r"各物质的物质的量随时间的变化如图所示。"),
        ("diagram", r"如图为电解水的实验装置，通电一段时间后，正极产生气体 $@a\,\mathrm{mL}$。"),
        ("bar", r"某同学测定了几种常见溶液的 $\mathrm{pH}$，结果如图所示，所取溶液均为 $@a\,\mathrm{mL}$。"),
    ),
    Subject.BIOLOGY: (
        ("curve", r"如图是某植物在不同光照强度下 $\mathrm{CO_2}$ 吸收量的变化曲线，"
                  r"光照强度为 $@a\,\mathrm{klx}$ 时曲线趋于平稳。"),
        ("bar", r"豌豆的高茎($D$)对矮茎($d$)为显性，某小组进行杂交实验，结果如图所示，子代共 $@n$ 株。"),
        ("diagram", r"如图是某生态系统的食物网示意图，其中生产者固定的太阳能为 $@n\,\mathrm{kJ}$。"),
        ("curve", r"如图表示某动物细胞分裂过程中染色体数目的变化，该动物体细胞中有 $@{c}$ 条染色体。"),
        ("bar", r"某兴趣小组探究温度对酶活性的影响，实验结果如图所示，各组反应时间均为 $@a\,\mathrm{min}$。"),
    ),
    Subject.GEOGRAPHY: (
        ("bar", r"如图为某地气温曲线和降水量柱状图，该地 7 月平均气温为 $@{a}^\circ\mathrm{C}$，"
                r"年降水量约 $@n\,\mathrm{mm}$。"),
        ("geometry", r"如图为某区域等高线地形图（单位：$\mathrm{m}$），等高距为 $@{c}0\,\mathrm{m}$，"
                     r"比例尺为 $1:@{n}00$。"),
        ("curve", r"读图，某地位于 $@{b}^\circ\mathrm{N}$，图中曲线表示该地一年中正午太阳高度的变化。"),
        ("bar", r"如图为某城市近 $@c$ 年常住人口数量变化统计图。"),
        ("curve", r"如图示意某河流水文站一年中的流量变化，最大流量约为 $@n\,\mathrm{m^3/s}$。"),
        ("diagram", r"如图为某区域水循环示意图，图中 $A$ 环节的水量约为 $@n\,\mathrm{mm}$。"),
    ),
}  # fmt: skip


@dataclass(frozen=True)
class _Ask:
    """Something a question asks for, and how its answer looks."""

    text: str
    kind: str  # a key of _VALUE_MAKERS, or "word" for a pick from ``choices``
    unit: str = ""  # LaTeX appended inside the answer's $...$
    choices: tuple[str, ...] = ()  # word answers; at least four, so a multiple-choice item can offer four


_ASKS = {
    Subject.MATH: (
        _Ask(r"$a$ 的值", "int"),
        _Ask("抛物线的对称轴方程", "axis"),
        _Ask(r"点 $C$ 的坐标", "coord"),
        _Ask(r"$\triangle ABC$ 的面积", "frac"),
        _Ask(r"线段 $BC$ 的长", "sqrt"),
        _Ask(r"$\sin B$ 的值", "frac"),
        _Ask("函数的最小值", "int"),
        _Ask(r"$x_1+x_2$ 的值", "int"),
        _Ask(r"$\angle ACB$ 的度数", "deg"),
        _Ask("不等式的解集", "ineq"),
        _Ask("被抽取学生的平均阅读时间", "dec", r"\,\text{小时}"),
        _Ask("直线的解析式", "line"),
        _Ask(r"$f(x)$ 的单调递增区间", "interval"),
        _Ask(r"$k$ 的取值范围", "ineq"),
    ),
    Subject.PHYSICS: (
        _Ask("电路中的电流", "dec", r"\,\mathrm{A}"),
        _Ask(r"$R_1$ 两端的电压", "dec", r"\,\mathrm{V}"),
        _Ask(r"电阻 $R_2$ 接入电路的阻值", "int", r"\,\Omega"),
        _Ask("电路消耗的总功率", "dec", r"\,\mathrm{W}"),
        _Ask("物块受到的摩擦力大小", "dec", r"\,\mathrm{N}"),
        _Ask("物块的加速度大小", "dec", r"\,\mathrm{m/s^2}"),
        _Ask(r"小车在前 $4\,\mathrm{s}$ 内的位移", "dec", r"\,\mathrm{m}"),
        _Ask("滑轮组的机械效率", "pct"),
        _Ask("拉力做的功", "int", r"\,\mathrm{J}"),
        _Ask("折射角的大小", "deg"),
        _Ask("物体的密度", "sci", r"\,\mathrm{kg/m^3}"),
        _Ask("物体所受的浮力", "dec", r"\,\mathrm{N}"),
        _Ask("拉力的功率", "dec", r"\,\mathrm{W}"),
        _Ask("滑片向右移动时电压表示数的变化情况", "word",
             choices=("变大", "变小", "不变", "先变大后变小", "先变小后变大")),
    ),
    Subject.CHEMISTRY: (
        _Ask("生成氧气的质量", "dec", r"\,\mathrm{g}"),
        _Ask("参加反应的氯酸钾的质量", "dec", r"\,\mathrm{g}"),
        _Ask("所得溶液中溶质的质量分数", "pct"),
        _Ask(r"$t_2\,^\circ\mathrm{C}$ 时甲物质的溶解度", "int", r"\,\mathrm{g}"),
        _Ask("该反应的化学方程式", "word", choices=(
            r"$\mathrm{2KClO_3\xrightarrow[\Delta]{MnO_2}2KCl+3O_2\uparrow}$",
            r"$\mathrm{2H_2O\xrightarrow{通电}2H_2\uparrow+O_2\uparrow}$",
            r"$\mathrm{NaOH+HCl=NaCl+H_2O}$",
            r"$\mathrm{N_2+3H_2\rightleftharpoons 2NH_3}$",
            r"$\mathrm{CaCO_3+2HCl=CaCl_2+H_2O+CO_2\uparrow}$",
        )),
        _Ask("稀盐酸中溶质的质量分数", "pct"),
        _Ask(r"$0\sim 2\,\mathrm{min}$ 内 $\mathrm{NH_3}$ 的平均反应速率", "dec", r"\,\mathrm{mol/(L\cdot min)}"),
        _Ask(r"平衡时 $\mathrm{N_2}$ 的转化率", "pct"),
        _Ask("负极产生气体的体积", "int", r"\,\mathrm{mL}"),
        _Ask("恰好完全反应时消耗氢氧化钠的质量", "dec", r"\,\mathrm{g}"),
        _Ask("生成物的物质的量", "dec", r"\,\mathrm{mol}"),
        _Ask(r"反应后溶液的 $\mathrm{pH}$", "int"),
        _Ask("该反应的基本反应类型", "word", choices=("分解反应", "化合反应", "置换反应", "复分解反应")),
        _Ask(r"图中 $B$ 处物质的化学式", "word",
             choices=(r"$\mathrm{O_2}$", r"$\mathrm{H_2}$", r"$\mathrm{CO_2}$", r"$\mathrm{NaCl}$",
                      r"$\mathrm{H_2O}$")),
    ),
    Subject.BIOLOGY: (
        _Ask("光合速率与呼吸速率相等时的光照强度", "dec", r"\,\mathrm{klx}"),
        _Ask("亲本的基因型", "word", choices=(r"$Dd\times dd$", r"$DD\times dd$", r"$Dd\times Dd$", r"$DD\times Dd$")),
        _Ask("子代中高茎植株所占的比例", "frac"),
        _Ask("该食物网中食物链的条数", "int", r"\,\text{条}"),
        _Ask("最高营养级最多获得的能量", "dec", r"\,\mathrm{kJ}"),
        _Ask(r"图中 $B$ 点所处的分裂时期", "word",
             choices=("有丝分裂后期", "有丝分裂中期", "减数第一次分裂前期", "减数第二次分裂后期")),
        _Ask("酶的最适温度", "int", r"^\circ\mathrm{C}"),
        _Ask(r"$A$ 点时限制光合速率的主要因素", "word",
             choices=("光照强度", r"$\mathrm{CO_2}$ 浓度", "温度", "水分")),
        _Ask("子代中纯合子所占的比例", "frac"),
        _Ask(r"$C$ 点时细胞中染色体的数目", "int", r"\,\text{条}"),
        _Ask("图中表示的生理过程", "word", choices=("光合作用", "呼吸作用", "蒸腾作用", "吸收作用")),
        _Ask("该实验的自变量", "word", choices=("温度", "光照强度", r"$\mathrm{pH}$", "酶的浓度")),
        _Ask("该种群的增长类型", "word", choices=("“S”型增长", "“J”型增长", "先增长后稳定", "持续下降")),
        _Ask("子代的性状分离比", "ratio"),
    ),
    Subject.GEOGRAPHY: (
        _Ask("该地的气候类型", "word",
             choices=("温带季风气候", "亚热带季风气候", "地中海气候", "热带雨林气候", "温带大陆性气候")),
        _Ask("该地的气温年较差", "int", r"^\circ\mathrm{C}"),
        _Ask(r"图中 $A$、$B$ 两地间的实地距离", "dec", r"\,\mathrm{km}"),
        _Ask(r"$A$、$B$ 两地的相对高度", "int", r"\,\mathrm{m}"),
        _Ask("夏至日该地的正午太阳高度", "deg"),
        _Ask("该地的年降水量", "int", r"\,\mathrm{mm}"),
        _Ask("该河流的主要补给类型", "word", choices=("雨水补给", "冰川融水补给", "季节性积雪融水补给", "地下水补给")),
        _Ask("该地夏至日的昼长", "dec", r"\,\text{小时}"),
        _Ask("图示区域的主要地形类型", "word", choices=("山地", "平原", "高原", "盆地", "丘陵")),
        _Ask("该城市的人口自然增长率", "pct"),
        _Ask("该河段的大致流向", "word", choices=("自东北流向西南", "自西向东", "自南向北", "自西北流向东南")),
        _Ask("图中坡度较陡的一侧", "word", choices=("东坡", "西坡", "南坡", "北坡")),
        _Ask("影响该地气候的主要因素", "word", choices=("纬度位置", "海陆位置", "地形", "洋流")),
        _Ask(r"$A$ 地的经度", "deg", r"\mathrm{E}"),
    ),
}  # fmt: skip

# Laws and formulas the solution steps cite.
_LAWS = {
    Subject.MATH: ("韦达定理", "勾股定理", "余弦定理", "二次函数的顶点坐标公式", "相似三角形的性质",
                   "等差数列求和公式", "导数与单调性的关系", "三角形面积公式"),
    Subject.PHYSICS: ("欧姆定律", "牛顿第二定律", "动能定理", "机械能守恒定律", "串联电路中电流处处相等",
                      "密度公式", "阿基米德原理", "光的折射规律"),
    Subject.CHEMISTRY: ("质量守恒定律", "化学方程式中各物质的质量比", "溶质质量分数的计算公式",
                        "物质的量与质量的关系", "化学反应速率的定义", "金属活动性顺序"),
    Subject.BIOLOGY: ("基因分离定律", "基因自由组合定律", "光合作用的原理", "能量流动逐级递减的特点",
                      "酶的高效性和专一性", "细胞分裂中染色体的变化规律"),
    Subject.GEOGRAPHY: ("等高线的判读方法", "气温年较差的计算方法", "比例尺的计算公式", "正午太阳高度的计算公式",
                        "地球自转的地理意义", "气候类型的判断方法"),
}  # fmt: skip

_EXPRESSIONS = {
    Subject.MATH: (r"x^2@{bs}x@{cs}=0", r"\frac{@a}{@b}\times @c", r"\sqrt{@a^2+@b^2}",
                   r"S=\frac{1}{2}\times @a\times @b", r"@{k}x@{bs}=\frac{@m}{x}"),
    Subject.PHYSICS: (r"I=\frac{U}{R}=\frac{@u}{@a}", r"F=ma=@a\times @b", r"W=Fs=@n\times @a",
                      r"P=UI=@u\times @b", r"v=v_0+at=@b+@c\times @a", r"\rho=\frac{m}{V}=\frac{@n}{@c}"),
    Subject.CHEMISTRY: (r"n=\frac{m}{M}=\frac{@a}{@b}", r"\frac{245}{96}=\frac{x}{@a}",
                        r"w=\frac{@a}{@n}\times 100\%", r"v=\frac{\Delta c}{\Delta t}=\frac{@a}{@c}"),
    Subject.BIOLOGY: (r"\frac{1}{2}\times\frac{1}{2}", r"@n\times 20\%\times 20\%", r"\frac{@a}{@n}",
                      r"2\times @c"),
    Subject.GEOGRAPHY: (r"@a-(@cs)", r"90^\circ-|@{b}^\circ-23.5^\circ|", r"@a\times @n",
                        r"\frac{@a}{@n}\times 100\%"),
}  # fmt: skip

# What a reader sees in each kind of figure; the first solution step quotes one.
_FIGURE_FACTS = {
    "curve": (r"曲线在 $x=@c$ 处取得最大值", r"图像经过点 $(@a,@b)$", "曲线与横轴有两个交点",
              r"当 $x>@c$ 时曲线逐渐趋于平稳"),
    "geometry": (r"$\angle A=@{deg}^\circ$", r"$AB=@a$，$AC=@b$", r"点 $D$ 在线段 $BC$ 上",
                 r"$OA$ 与 $OB$ 的夹角为 $@{deg}^\circ$"),
    "bar": (r"第 $@g$ 组数据最大，约为 $@n$", r"各组数据之和为 $@n$", r"最小的一组约为 $@a$"),
    "diagram": (r"$R_1$ 与 $R_2$ 串联", r"图中方框 $A$ 与方框 $B$ 直接相连", r"图中共有 $@c$ 个组成部分",
                r"箭头由 $A$ 指向 $C$"),
}  # fmt: skip

_SOLUTION_MIDDLE = (
    r"题目要求@ask，先整理已知条件：$a=@a$，$b=@b$。",
    r"根据@law，列出关系式 $@expr$。",
    r"代入已知数据，得 $@expr$，计算得 $@v$。",
    "结合@topic的相关知识进行分析。",
    r"化简整理后解得结果为 $@v$，符合题意。",
)

# Free-response sub-questions ask for one to three things each; fill-in items have one to six
# blanks. With multiple choice always one answer, the whole file averages about 3.24 answers,
# the paper's figure.
_FILL_BLANKS = {1: 15, 2: 20, 3: 25, 4: 20, 5: 12, 6: 8}
_FREE_SUBQUESTIONS = {2: 30, 3: 45, 4: 25}
_ASKS_PER_SUBQUESTION = {1: 30, 2: 50, 3: 20}
# Reference solutions have 5.15 steps on average.
_SOLUTION_STEPS = {3: 11, 4: 23, 5: 30, 6: 21, 7: 9, 8: 6}


# A multiple-choice item draws four different answers, so every word ask needs at least four.
assert all(len(ask.choices) >= 4 for asks in _ASKS.values() for ask in asks if ask.kind == "word")


def _weighted(rng: random.Random, weights: dict):
    keys = list(weights)
    return rng.choices(keys, weights=list(weights.values()))[0]


# --------------------------------------------------------------------------------------------
# Answer values
# --------------------------------------------------------------------------------------------


def _signed(value: int) -> str:
    return f"+{value}" if value >= 0 else str(value)


def _frac(rng: random.Random) -> str:
    denominator = rng.randint(2, 12)
    return rf"\frac{{{rng.randint(1, denominator - 1)}}}{{{denominator}}}"


_VALUE_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "int": lambda rng: str(rng.randint(2, 120)),
    "dec": lambda rng: f"{rng.uniform(0.1, 60):.{rng.choice((1, 2))}f}",
    "frac": _frac,
    "sqrt": lambda rng: rf"{rng.randint(2, 9)}\sqrt{{{rng.choice((2, 3, 5, 6, 7))}}}",
    "coord": lambda rng: f"({rng.randint(-9, 9)},{rng.randint(-9, 9)})",
    "axis": lambda rng: f"x={rng.randint(-6, 6)}",
    "deg": lambda rng: rf"{rng.choice((15, 30, 36, 45, 50, 60, 72, 75, 90, 120))}^\circ",
    "ineq": lambda rng: rng.choice((f"x>{rng.randint(-5, 9)}", f"{rng.randint(-9, -1)}<x<{rng.randint(1, 9)}")),
    "interval": lambda rng: rf"({rng.randint(-5, 5)},+\infty)",
    "line": lambda rng: f"y={rng.randint(1, 6)}x{_signed(rng.randint(-9, 9))}",
    "pct": lambda rng: rf"{rng.uniform(5, 95):.1f}\%",
    "sci": lambda rng: rf"{rng.uniform(1, 9.9):.1f}\times 10^{{{rng.randint(2, 4)}}}",
    "ratio": lambda rng: rng.choice(("3:1", "1:1", "9:3:3:1", "1:2:1", "1:1:1:1")),
}


def _answer(rng: random.Random, ask: _Ask) -> str:
    if ask.kind == "word":
        return rng.choice(ask.choices)
    return f"${_VALUE_MAKERS[ask.kind](rng)}{ask.unit}$"


def _distinct_answers(rng: random.Random, ask: _Ask, count: int) -> list[str]:
    """``count`` different answers of one kind, for multiple-choice options."""
    answers: list[str] = []
    while len(answers) < count:
        candidate = _answer(rng, ask)
        if candidate not in answers:
            answers.append(candidate)
    return answers


# --------------------------------------------------------------------------------------------
# Questions
# --------------------------------------------------------------------------------------------


@dataclass
class Question:
    """One synthetic benchmark question, before its figure is drawn."""

    index: int
    hash_id: str
    tag: str
    subject: Subject
    qtype: QuestionType
    grade: int
    text: str
    ground_truth: list[str]
    solution_steps: list[str]
    knowledge_points: list[str]
    difficulty: float
    figure: str
    asks: list[str]
    # Numbers and phrases the text was built from; chains of thought about this question reuse them.
    params: dict[str, str] = field(default_factory=dict)

    @property
    def format_solution(self) -> str:
        return "\n".join(f"步骤{number}：{step}" for number, step in enumerate(self.solution_steps, start=1))

    def record(self, img: str | None) -> dict:
        """The reference release record, plus metadata fields."""
        record = {
            "hash_id": self.hash_id,
            "question": self.text,
            "type": QUESTION_TYPE_ZH[self.qtype],
            "subject": self.tag,
            "img": img,
            "format_answer": {"ground_truth": self.ground_truth, "format_solution": self.format_solution},
            "grade": self.grade,
            "knowledge_points": self.knowledge_points,
            "difficulty": self.difficulty,
        }
        if img is None:
            del record["img"]
        return record


def _params(rng: random.Random, subject: Subject, stage: Stage) -> dict[str, str]:
    a, b, c = rng.sample(range(2, 21), 3)
    topics = _TOPICS[(subject, stage)]
    return {
        "a": str(a),
        "b": str(b),
        "c": str(c),
        "n": str(rng.randint(50, 2000)),
        "k": str(rng.randint(1, 6)),
        "m": str(rng.randint(2, 24)),
        "u": str(rng.choice((3, 4.5, 6, 9, 12))),
        "g": str(rng.randint(1, 5)),
        "deg": str(rng.choice((30, 36, 40, 45, 50, 60, 72, 120))),
        "bs": _signed(rng.randint(-9, 9)),
        "cs": _signed(rng.randint(-12, 12)),
        "v": str(rng.randint(2, 200)),
        "law": rng.choice(_LAWS[subject]),
        "topic": rng.choice(topics),
    }


def _solution_steps(rng: random.Random, question: Question, params: dict[str, str]) -> list[str]:
    """About five steps: read the figure, reason in the middle, state the answer."""
    count = _weighted(rng, _SOLUTION_STEPS)
    steps = [_fill("由图可知，" + rng.choice(_FIGURE_FACTS[question.figure]) + "。", params)]
    for _ in range(count - 2):
        params["expr"] = _fill(rng.choice(_EXPRESSIONS[question.subject]), params)
        params["ask"] = rng.choice(question.asks)
        params["v"] = str(rng.randint(2, 200))
        steps.append(_fill(rng.choice(_SOLUTION_MIDDLE), params))
    if question.qtype == QuestionType.MULTIPLE_CHOICE:
        steps.append(f"对照各选项，故选 {question.ground_truth[0]}。")
    else:
        steps.append("综上，答案依次为：" + "；".join(question.ground_truth) + "。")
    return steps


def _multiple_choice(rng: random.Random, subject: Subject, stem: str) -> tuple[str, list[str], list[str]]:
    ask = rng.choice(_ASKS[subject])
    options = _distinct_answers(rng, ask, 4)
    letter = rng.choice("ABCD")
    lines = [f"{stem}则{ask.text}为（　　）"]
    lines += [f"{option_letter}. {option}" for option_letter, option in zip("ABCD", options, strict=True)]
    return "\n".join(lines), [letter], [ask.text]


def _fill_in_blank(rng: random.Random, subject: Subject, stem: str) -> tuple[str, list[str], list[str]]:
    asks = rng.sample(_ASKS[subject], _weighted(rng, _FILL_BLANKS))
    text = stem + "则" + "，".join(f"{ask.text}为___" for ask in asks) + "。"
    return text, [_answer(rng, ask) for ask in asks], [ask.text for ask in asks]


def _join_asks(texts: list[str]) -> str:
    """Lists asks the way a Chinese sentence does: A; A和B; A、B和C."""
    if len(texts) == 1:
        return texts[0]
    return "、".join(texts[:-1]) + "和" + texts[-1]


def _free_response(rng: random.Random, subject: Subject, stem: str) -> tuple[str, list[str], list[str]]:
    sizes = [_weighted(rng, _ASKS_PER_SUBQUESTION) for _ in range(_weighted(rng, _FREE_SUBQUESTIONS))]
    asks = rng.sample(_ASKS[subject], sum(sizes))
    lines, start = [stem], 0
    for number, size in enumerate(sizes, start=1):
        group = asks[start : start + size]
        start += size
        lines.append(f"({number}) 求{_join_asks([ask.text for ask in group])}；")
    lines[-1] = lines[-1][:-1] + "。"
    return "\n".join(lines), [_answer(rng, ask) for ask in asks], [ask.text for ask in asks]


_BODY_MAKERS = {
    QuestionType.MULTIPLE_CHOICE: _multiple_choice,
    QuestionType.FILL_IN_BLANK: _fill_in_blank,
    QuestionType.FREE_RESPONSE: _free_response,
}


def make_question(seed: int, index: int) -> Question:
    """Question ``index`` of the synthetic set for ``seed``, without its figure (cheap)."""
    rng = _rng(seed, "question", index)
    # Subjects are equally likely (the paper balances subjects, not tags; math has three stages).
    tag = rng.choice(_TAGS_BY_SUBJECT[rng.choice(list(Subject))])
    subject, stage = parse_release_tag(tag)
    # Types cycle so every subject-type cell stays about equally full, as in the paper.
    qtype = _TYPES[index % len(_TYPES)]
    params = _params(rng, subject, stage)
    figure, stem_template = rng.choice(_STEMS[subject])
    stem = _fill(stem_template, params)
    text, ground_truth, asks = _BODY_MAKERS[qtype](rng, subject, stem)
    topics = rng.sample(_TOPICS[(subject, stage)], rng.choice((1, 1, 2, 2, 2, 3)))
    question = Question(
        index=index,
        hash_id=question_hash_id(seed, index),
        tag=tag,
        subject=subject,
        qtype=qtype,
        grade=rng.randint(*_GRADE_RANGE[stage]),
        text=text,
        ground_truth=ground_truth,
        solution_steps=[],
        knowledge_points=[f"{topic}·{rng.choice(_ASPECTS)}" for topic in topics],
        difficulty=round(rng.betavariate(2.2, 2.8), 3),
        figure=figure,
        asks=asks,
        params=params,
    )
    question.solution_steps = _solution_steps(rng, question, dict(params))
    return question


def iter_questions(scale: float, seed: int = 0, *, with_images: bool = True) -> Iterator[dict]:
    """Release-format question records, one at a time. ``with_images=False`` drops ``img`` (much faster)."""
    for index in range(counts_for_scale(scale)["questions"]):
        question = make_question(seed, index)
        img = render_figure_b64(question, seed) if with_images else None
        yield question.record(img)


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------

IMAGE_WIDTH_RANGE = (300, 1200)
IMAGE_HEIGHT_RANGE = (200, 900)
JPEG_QUALITY = 85


@lru_cache(maxsize=32)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _figure_size(rng: random.Random) -> tuple[int, int]:
    # Exam figures cluster around 500-700 px wide and are wider than tall.
    width = round(rng.triangular(IMAGE_WIDTH_RANGE[0], IMAGE_WIDTH_RANGE[1], 620))
    height = round(width * rng.uniform(0.5, 0.95))
    return width, min(IMAGE_HEIGHT_RANGE[1], max(IMAGE_HEIGHT_RANGE[0], height))


def _arrow(draw: ImageDraw.ImageDraw, start: tuple[int, int], end: tuple[int, int], width: int) -> None:
    draw.line([start, end], fill="black", width=width)
    angle = math.atan2(end[1] - start[1], end[0] - start[0])
    size = 4 + 3 * width
    left = (end[0] - size * math.cos(angle - 0.4), end[1] - size * math.sin(angle - 0.4))
    right = (end[0] - size * math.cos(angle + 0.4), end[1] - size * math.sin(angle + 0.4))
    draw.polygon([end, left, right], fill="black")


def _draw_curve(draw: ImageDraw.ImageDraw, size: tuple[int, int], rng: random.Random, font, line: int) -> None:
    width, height = size
    margin = max(30, width // 12)
    origin = (margin + rng.randint(0, width // 4), height - margin - rng.randint(0, height // 4))
    _arrow(draw, (margin // 2, origin[1]), (width - margin // 2, origin[1]), line)
    _arrow(draw, (origin[0], height - margin // 2), (origin[0], margin // 2), line)
    draw.text((width - margin // 2 - 6, origin[1] + 4), "x", fill="black", font=font)
    draw.text((origin[0] + 6, margin // 2 - 4), "y", fill="black", font=font)
    draw.text((origin[0] - font.size, origin[1] + 2), "O", fill="black", font=font)
    # Ticks along the x axis, labelled 1, 2, 3...
    step = max(30, (width - origin[0] - margin) // rng.randint(4, 8))
    for number, x in enumerate(range(origin[0] + step, width - margin, step), start=1):
        draw.line([(x, origin[1] - 4), (x, origin[1] + 4)], fill="black", width=1)
        draw.text((x - 4, origin[1] + 6), str(number), fill="black", font=font)
    shape = rng.choice(("parabola", "sine", "saturating", "line"))
    a, phase = rng.uniform(0.3, 1.0), rng.uniform(0, math.pi)
    points = []
    for x in range(margin // 2, width - margin // 2, 4):
        t = (x - margin) / max(1, width - 2 * margin)  # about 0..1 across the plot
        if shape == "parabola":
            y = a * (2 * t - 1) ** 2 - 0.3
        elif shape == "sine":
            y = 0.5 * a * math.sin(6 * t + phase)
        elif shape == "saturating":
            y = a * (1 - math.exp(-5 * t)) - 0.1
        else:
            y = a * (t - 0.3)
        points.append((x, origin[1] - y * (height - 2 * margin)))
    # Draw only the stretches that stay inside the frame; joining across a gap would draw a false line.
    inside, run = [], []
    for x, y in points:
        if margin // 2 <= y <= height - margin // 2:
            run.append((x, y))
            inside.append((x, y))
        elif run:
            if len(run) > 1:
                draw.line(run, fill="black", width=line + 1)
            run = []
    if len(run) > 1:
        draw.line(run, fill="black", width=line + 1)
    if len(inside) > 1:
        for label in rng.sample("ABCP", 2):
            x, y = rng.choice(inside)
            draw.ellipse([x - 3, y - 3, x + 3, y + 3], fill="black")
            draw.text((x + 5, y - font.size - 2), label, fill="black", font=font)


def _draw_geometry(draw: ImageDraw.ImageDraw, size: tuple[int, int], rng: random.Random, font, line: int) -> None:
    width, height = size
    margin = max(30, min(width, height) // 8)
    # Apex in the upper middle, base corners in the lower outer thirds: never a sliver.
    apex = (rng.randint(width * 3 // 10, width * 7 // 10), rng.randint(margin, height * 35 // 100))
    left = (rng.randint(margin, width * 35 // 100), rng.randint(height * 65 // 100, height - margin))
    right = (rng.randint(width * 65 // 100, width - margin), rng.randint(height * 65 // 100, height - margin))
    draw.polygon([apex, left, right], outline="black", width=line)
    for label, (x, y), (dx, dy) in (("A", apex, (-4, -font.size - 6)), ("B", left, (-font.size, 2)),
                                      ("C", right, (6, 2))):  # fmt: skip
        draw.text((x + dx, y + dy), label, fill="black", font=font)
    midpoint = ((left[0] + right[0]) // 2, (left[1] + right[1]) // 2)
    draw.line([apex, midpoint], fill="black", width=1)
    draw.text((midpoint[0] - 4, midpoint[1] + 4), "D", fill="black", font=font)
    if rng.random() < 0.5:
        # A circle through roughly the triangle's extent, centred on its centroid.
        cx = (apex[0] + left[0] + right[0]) / 3
        cy = (apex[1] + left[1] + right[1]) / 3
        radius = max(math.dist((cx, cy), point) for point in (apex, left, right))
        draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], outline="black", width=line)
        draw.ellipse([cx - 3, cy - 3, cx + 3, cy + 3], fill="black")
        draw.text((cx + 5, cy), "O", fill="black", font=font)


def _draw_bar(draw: ImageDraw.ImageDraw, size: tuple[int, int], rng: random.Random, font, line: int) -> None:
    width, height = size
    margin = max(36, width // 10)
    base_y, top_y = height - margin, margin // 2
    _arrow(draw, (margin, base_y), (width - margin // 3, base_y), line)
    _arrow(draw, (margin, base_y), (margin, top_y), line)
    bars = rng.randint(3, 8)
    slot = (width - margin * 2) // bars
    values = [rng.randint(10, 100) for _ in range(bars)]
    for number, value in enumerate(values):
        x0 = margin + number * slot + slot // 5
        x1 = x0 + max(6, slot * 3 // 5)
        y0 = base_y - value / 125 * (base_y - top_y)
        shade = rng.randint(90, 200)
        draw.rectangle([x0, y0, x1, base_y], fill=(shade, shade, shade), outline="black")
        draw.text((x0, y0 - font.size - 2), str(value), fill="black", font=font)
        draw.text((x0, base_y + 4), str(number + 1), fill="black", font=font)
    for tick in range(1, 5):
        y = base_y - tick * 25 / 125 * (base_y - top_y)
        draw.line([(margin - 4, y), (margin, y)], fill="black", width=1)
        draw.text((margin - 6 - font.size * 2, y - font.size // 2), str(tick * 25), fill="black", font=font)


_DIAGRAM_LABELS = {
    Subject.MATH: ("A", "B", "C", "D"),
    Subject.PHYSICS: ("R1", "R2", "A", "V", "S", "L"),
    Subject.CHEMISTRY: ("A", "B", "C", "H2O", "O2", "CO2"),
    Subject.BIOLOGY: ("A", "B", "C", "D", "E"),
    Subject.GEOGRAPHY: ("A", "B", "C", "D"),
}


def _draw_diagram(draw: ImageDraw.ImageDraw, size: tuple[int, int], rng: random.Random, font, line: int,
                  labels: tuple[str, ...]) -> None:  # fmt: skip
    """A closed loop with labelled boxes and round meters on it: a circuit, or a flow of matter."""
    width, height = size
    margin = max(30, min(width, height) // 6)
    left, top, right, bottom = margin, margin, width - margin, height - margin
    draw.rectangle([left, top, right, bottom], outline="black", width=line)
    # A battery on the bottom edge: a gap bridged by a long and a short plate.
    bx = (left + right) // 2
    draw.line([(bx - 8, bottom), (bx + 8, bottom)], fill="white", width=line + 2)
    draw.line([(bx - 8, bottom - 14), (bx - 8, bottom + 14)], fill="black", width=line)
    draw.line([(bx + 8, bottom - 7), (bx + 8, bottom + 7)], fill="black", width=line + 2)
    slots = [((left + right) // 2 + offset, top) for offset in (-(right - left) // 4, (right - left) // 4)]
    slots += [(left, (top + bottom) // 2), (right, (top + bottom) // 2)]
    box_w, box_h = max(36, width // 10), max(18, height // 14)
    # Two to four parts; zip stops at the shorter list on purpose.
    parts = rng.randint(2, 4)
    for (x, y), label in zip(slots[:parts], rng.sample(labels, min(4, len(labels))), strict=False):
        if rng.random() < 0.7:
            draw.rectangle([x - box_w // 2, y - box_h // 2, x + box_w // 2, y + box_h // 2],
                           fill="white", outline="black", width=line)  # fmt: skip
        else:
            radius = box_h // 2 + 4
            draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill="white", outline="black", width=line)
        draw.text((x - font.size // 2, y - font.size // 2), label, fill="black", font=font)
    if rng.random() < 0.5:
        _arrow(draw, (left + 10, top + 10), (left + 10 + margin, top + 10), 1)


def render_figure(question: Question, seed: int) -> Image.Image:
    """The question's figure, drawn from its own random stream (so text stays identical without it)."""
    rng = _rng(seed, "image", question.index)
    size = _figure_size(rng)
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = _font(max(12, min(size) // 22))
    line = 2 if min(size) >= 400 else 1
    if question.figure == "curve":
        _draw_curve(draw, size, rng, font, line)
    elif question.figure == "geometry":
        _draw_geometry(draw, size, rng, font, line)
    elif question.figure == "bar":
        _draw_bar(draw, size, rng, font, line)
    else:
        _draw_diagram(draw, size, rng, font, line, _DIAGRAM_LABELS[question.subject])
    return image


def render_figure_b64(question: Question, seed: int) -> str:
    buffer = io.BytesIO()
    render_figure(question, seed).save(buffer, "JPEG", quality=JPEG_QUALITY)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


# --------------------------------------------------------------------------------------------
# Chains of thought with step labels (PEM-800K and PEBench)
# --------------------------------------------------------------------------------------------

# Judges label most steps correct; errors spread over the other eight codes, calculation and
# knowledge-application slips most often. PEBench was chosen to exercise the labels, so it has
# more errors. IAE can only label a chain's last step, so its weight applies there alone (about 1% and
# 2% of all steps).
PEM_MODELS = 40
PEM_LABEL_WEIGHTS = {"CS": 74, "ICE": 4, "QM": 3, "LRK": 3, "KAE": 5, "LRE": 4, "HE": 2, "CE": 4, "IAE": 5}
PEBENCH_LABEL_WEIGHTS = {"CS": 58, "ICE": 6, "QM": 5, "LRK": 5, "KAE": 7, "LRE": 6, "HE": 4, "CE": 6, "IAE": 12}
assert set(PEM_LABEL_WEIGHTS) == set(PEBENCH_LABEL_WEIGHTS) == set(LABEL_CODES), "label codes drifted"

_STUDENT_OPENINGS = (
    r"首先读题，本题要求@ask。",
    r"由图可知，@fact。",
    r"题目给出的已知条件有：$a=@a$，$b=@b$。",
)
_STUDENT_MIDDLE = _SOLUTION_MIDDLE + (
    r"接下来考虑@ask，需要用到@law。",
    r"由上一步可得 $@expr$。",
)
_CORRECT_NOTES = ("该步骤正确。", "计算无误。", "推理合理。", "正确提取了图中信息。", "公式使用正确。")

# How a wrong step reads, and why it is wrong, per error code.
_ERROR_STEPS = {
    "ICE": (r"由图可知，图中曲线在 $x=@w$ 处取得最大值。", r"从图中读出 $AB=@w$。"),
    "QM": (r"题目要求的是@other，下面直接求@other。", r"题目中 $a=@b$，$b=@a$。"),
    "LRK": (r"这里可以直接用@wronglaw求解。", r"本题无需考虑@topic，直接代入即可。"),
    "KAE": (r"根据@law，得 $@expr$。", r"由@law可知，两者成正比，所以结果为 $@w$。"),
    "LRE": (r"因为 $@a>@b$，所以结论一定成立。", r"由上一步可知所有情况都满足条件，故结论成立。"),
    "HE": (r"题目中已经给出 $v=@w$。", r"由常识可知，@topic中该量恒为 $@w$。"),
    "CE": (r"计算得 $@expr=@w$。", r"化简后得到 $@w$。"),
    "IAE": (r"所以第 (1) 问的答案为 @first。", "综上，本题求解完毕。"),
}
_ERROR_NOTES = {
    "ICE": ("误读了图中的信息，图中实际显示@fact。", "读图错误，图中数据与该步骤所写不符。"),
    "QM": ("误解了题意，题目要求的是@ask。", "弄错了题目给出的条件。"),
    "LRK": ("缺乏@topic的相关知识，选用的方法不正确。", "没有掌握解决该问题所需的知识。"),
    "KAE": ("@law使用错误，公式中各量的对应关系不正确。", "概念理解正确，但公式套用错误。"),
    "LRE": ("推理缺乏依据，由前面的步骤不能得出该结论。", "论证过程存在逻辑漏洞。"),
    "HE": ("题目中并未给出该条件，属于凭空捏造。", "该结论与已知事实矛盾。"),
    "CE": ("计算错误，正确结果应为 $@v$。", "运算过程出错，数值计算不正确。"),
    "IAE": ("只回答了部分问题，缺少其余小问的答案。", "没有给出最终答案。"),
}


def _step_count(rng: random.Random, minimum: int) -> int:
    # About six steps, from two (or three) up to twelve.
    return min(12, max(minimum, round(rng.gauss(6, 2.2))))


def _step_label(rng: random.Random, weights: dict[str, int], is_last: bool) -> str:
    label = _weighted(rng, weights)
    # An incomplete answer can only show at the end of a chain; elsewhere draw again.
    while label == "IAE" and not is_last:
        label = _weighted(rng, weights)
    return label


def _labelled_steps(rng: random.Random, question: Question, weights: dict[str, int], minimum: int) -> list[list]:
    """A student's chain of thought about ``question`` as ``[step_text, label, explanation]`` triples."""
    params = dict(question.params)
    params["first"] = question.ground_truth[0]
    count = _step_count(rng, minimum)
    steps = []
    for position in range(count):
        is_last = position == count - 1
        label = _step_label(rng, weights, is_last)
        params["fact"] = _fill(rng.choice(_FIGURE_FACTS[question.figure]), params)
        params["expr"] = _fill(rng.choice(_EXPRESSIONS[question.subject]), params)
        params["ask"] = rng.choice(question.asks)
        params["other"] = rng.choice(_ASKS[question.subject]).text
        params["wronglaw"] = rng.choice(_LAWS[question.subject])
        params["v"] = str(rng.randint(2, 200))
        params["w"] = str(rng.randint(2, 200))
        if label != "CS":
            text = _fill(rng.choice(_ERROR_STEPS[label]), params)
            note = _fill(rng.choice(_ERROR_NOTES[label]), params)
        else:
            if position == 0:
                text = _fill(rng.choice(_STUDENT_OPENINGS), params)
            elif is_last:
                text = "所以答案为 " + "；".join(question.ground_truth) + "。"
            else:
                text = _fill(rng.choice(_STUDENT_MIDDLE), params)
            note = rng.choice(_CORRECT_NOTES) if rng.random() < 0.4 else ""
        steps.append([text, label, note])
    return steps


def _chain_record(question: Question, steps: list[list]) -> dict:
    return {
        "hash_id": question.hash_id,
        "question": question.text,
        "ground_truth": question.ground_truth,
        # The chain is the steps in order; a judge splitting it on blank lines recovers them.
        "student_infer": "\n\n".join(step[0] for step in steps),
        "step_labels": steps,
    }


def _question_of(position: int, records: int, questions: int) -> int:
    """Spreads ``records`` chains evenly over ``questions``, in consecutive blocks."""
    return position * questions // records


def iter_pem(scale: float, seed: int = 0) -> Iterator[dict]:
    """PEM-800K style records: about 25 chains per question at every scale, grouped by question."""
    counts = counts_for_scale(scale)
    question = None
    for position in range(counts["pem"]):
        index = _question_of(position, counts["pem"], counts["questions"])
        # Records come grouped by question, so rebuilding only on change keeps this fast and
        # holds a single question in memory.
        if question is None or question.index != index:
            question = make_question(seed, index)
        rng = _rng(seed, "pem", position)
        steps = _labelled_steps(rng, question, PEM_LABEL_WEIGHTS, minimum=2)
        # The chains come from about forty models (PIPELINE.md stage 6); coverage filters on it.
        yield {**_chain_record(question, steps), "model": f"model-{rng.randrange(PEM_MODELS):02d}"}


def iter_pebench(scale: float, seed: int = 0) -> Iterator[dict]:
    """PEBench records: human-labelled chains (at least three steps), not among the PEM chains."""
    counts = counts_for_scale(scale)
    for position in range(counts["pebench"]):
        question = make_question(seed, _question_of(position, counts["pebench"], counts["questions"]))
        steps = _labelled_steps(_rng(seed, "pebench", position), question, PEBENCH_LABEL_WEIGHTS, minimum=3)
        chain = _chain_record(question, steps)
        # The reference PEBench files carry the reference solution between question and answer.
        yield {
            "hash_id": chain["hash_id"],
            "question": chain["question"],
            "format_solution": question.format_solution,
            "ground_truth": chain["ground_truth"],
            "student_infer": chain["student_infer"],
            "step_labels": chain["step_labels"],
        }


ITERATORS: dict[str, Callable[[float, int], Iterator[dict]]] = {
    "questions": iter_questions,
    "pem": iter_pem,
    "pebench": iter_pebench,
}


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def write_jsonl(path: str, records: Iterator[dict]) -> int:
    """Writes records one line each, to a temporary name first so a killed run leaves no half file."""
    partial = path + ".partial"
    count = 0
    with open(partial, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
            out.write("\n")
            count += 1
    os.replace(partial, path)
    return count


def _parse_only(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in ITERATORS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected a comma list of {', '.join(ITERATORS)}, got {value!r}")
    return [name for name in ITERATORS if name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, required=True, help="1.0 = the paper's sizes")
    parser.add_argument("--out", required=True, help="directory for the JSONL files (created if missing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=_parse_only, default=list(ITERATORS), help="comma list: questions,pem,pebench")
    args = parser.parse_args(argv)
    try:
        counts = counts_for_scale(args.scale)
    except ValueError as error:
        parser.error(str(error))
    os.makedirs(args.out, exist_ok=True)
    total_start = time.perf_counter()
    for name in args.only:
        path = os.path.join(args.out, FILE_NAMES[name])
        start = time.perf_counter()
        written = write_jsonl(path, ITERATORS[name](args.scale, args.seed))
        assert written == counts[name], f"{name}: wrote {written}, expected {counts[name]}"
        print(f"{FILE_NAMES[name]}: {written} records, {os.path.getsize(path)} bytes, "
              f"{time.perf_counter() - start:.1f} s", flush=True)  # fmt: skip
    print(f"total: {time.perf_counter() - total_start:.1f} s (scale {args.scale}, seed {args.seed})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
