"""Per-language patent text: title, abstract, numbered claims and description.

One invention is expressed in English, Chinese or Japanese with the conventions of each
office (US-style "The device of claim 1, wherein", CN "根据权利要求1所述的", JP
"【請求項１】 … 請求項１に記載の"). Phrase variants are picked per member so family
members in one language are not byte-identical.
"""

from __future__ import annotations

import random

from spark_jobs.lib.sample.claims_plan import ClaimSpec
from spark_jobs.lib.sample.glossary import Term
from spark_jobs.lib.sample.plan import Feature, Invention

_FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")


def full_width(n: int | str) -> str:
    return str(n).translate(_FULL_WIDTH)


def _a(phrase: str) -> str:
    return ("an " if phrase[0].lower() in "aeiou" else "a ") + phrase


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _zh_rel(rel: Term, anchor: str) -> str:
    pre, _, post = rel.zh.partition("|")
    return f"{pre}所述{anchor}{post}"


class English:
    lang = "en"

    def __init__(self, r: random.Random):
        self.comprising = r.choice(["comprising", "including"])
        self.of = r.choice(["of", "according to", "as claimed in"])

    def parents(self, c: ClaimSpec) -> str:
        if c.style == "or":
            return f"claim {c.parents[0]} or {c.parents[1]}"
        if c.style == "range":
            return f"any one of claims {c.parents[0]} to {c.parents[-1]}"
        return f"claim {c.parents[0]}"

    def feature(self, f: Feature) -> str:
        text = f"{_a(f.component.en)} {f.relation.en} the {f.anchor.en}"
        if f.material:
            text += f", the {f.component.en} being made of {f.material.en}"
        if f.function:
            text += f", the {f.component.en} being configured to {f.function.en}"
        return text

    def claim(self, inv: Invention, c: ClaimSpec) -> str:
        d = inv.device.en
        if c.kind == "device":
            items = [_a(inv.base.en)] + [self.feature(f) for f in inv.core]
            body = ";\n".join(items[:-1]) + ";\nand " + items[-1]
            return f"{c.number}. {_cap(_a(d))}, {self.comprising}:\n{body}."
        if c.kind == "method":
            steps = [f"{s.en} the {comp.en}" for s, comp in inv.method_steps]
            body = ";\n".join(steps[:-1]) + "; and\n" + steps[-1]
            return (
                f"{c.number}. A method of operating {_a(d)} to {inv.purpose.en}, "
                f"the method {self.comprising}:\n{body}."
            )
        head = f"{c.number}. The {d} {self.of} {self.parents(c)}"
        if c.kind == "feature":
            return f"{head}, further {self.comprising} {self.feature(c.feature)}."
        if c.kind == "parameter":
            p = c.parameter
            return (
                f"{head}, wherein the {p.component.en} has a {p.parameter.en} of "
                f"{p.low} to {p.high} {p.parameter.key}."
            )
        return f"{head}, wherein the {d} is configured to {inv.purpose.en}."

    def title(self, inv: Invention) -> str:
        c0, c1 = inv.core[0].component.en, inv.core[1].component.en
        if inv.method_steps:
            return f"{_cap(inv.device.en)} and method to {inv.purpose.en}"
        return f"{_cap(inv.device.en)} with {c0} and {c1}"

    def abstract(self, inv: Invention, core: tuple[Feature, ...] | None = None) -> str:
        d = inv.device.en
        core = inv.core if core is None else core
        parts = [_a(inv.base.en)] + [
            f"{_a(f.component.en)} {f.relation.en} the {f.anchor.en}" for f in core
        ]
        s = [
            f"The present disclosure relates to {_a(d)} in the field of {inv.field.en}.",
            f"The {d} {'includes' if self.comprising == 'including' else 'comprises'} "
            f"{', '.join(parts[:-1])}, and {parts[-1]}.",
        ]
        s += [f"The {f.component.en} is made of {f.material.en}." for f in core if f.material]
        s.append(f"This arrangement makes it possible to {inv.purpose.en}.")
        return " ".join(s)

    def description(self, inv: Invention, r: random.Random) -> str:
        d = inv.device.en
        para = iter(range(1, 1000))
        p = lambda text: f"[{next(para):04d}] {text}"  # noqa: E731
        lines = [
            "TECHNICAL FIELD",
            p(f"The present invention relates to {inv.field.en}, and in particular to {_a(d)}."),
            "BACKGROUND",
            p(
                f"Conventional {d}s find it difficult to {inv.purpose.en}, because the "
                f"{inv.base.en} and the surrounding parts are arranged independently."
            ),
            "SUMMARY",
            p(
                f"An object of the invention is to provide {_a(d)} able to {inv.purpose.en}. "
                + self.abstract(inv)
            ),
            "DETAILED DESCRIPTION",
            p(f"As shown in FIG. 1, the {d} 1 includes the {inv.base.en} 10."),
        ]
        numerals = {inv.base: 10}
        for i, f in enumerate(inv.core + inv.extras, start=2):
            numerals[f.component] = 10 * i
            text = (
                f"The {f.component.en} {10 * i} is {f.relation.en} the {f.anchor.en} "
                f"{numerals.get(f.anchor, 10)}."
            )
            if f.material:
                text += (
                    f" In this embodiment the {f.component.en} {10 * i} is made of {f.material.en}."
                )
            if f.function:
                text += f" The {f.component.en} {10 * i} serves to {f.function.en}."
            lines.append(p(text))
        for prm in inv.parameters:
            mid = round((prm.low + prm.high) / 2, 1)
            lines.append(
                p(
                    f"The {prm.parameter.en} of the {prm.component.en} is preferably "
                    f"{prm.low} to {prm.high} {prm.parameter.key}, for example {mid} "
                    f"{prm.parameter.key}."
                )
            )
        if inv.method_steps:
            steps = ", then ".join(f"{s.en} the {c.en}" for s, c in inv.method_steps)
            lines.append(p(f"A method using the {d} comprises {steps}."))
        lines.append(p(f"With the above structure, the {d} 1 can {inv.purpose.en}."))
        return "\n".join(lines)


class Chinese:
    lang = "zh"

    def __init__(self, r: random.Random):
        self.range_sep = r.choice(["至", "-", "~"])
        self.intro = r.choice(["其特征在于，包括", "包括"])

    def parents(self, c: ClaimSpec) -> str:
        if c.style == "or":
            return f"权利要求{c.parents[0]}或{c.parents[1]}"
        if c.style == "range":
            return f"权利要求{c.parents[0]}{self.range_sep}{c.parents[-1]}中任一项"
        return f"权利要求{c.parents[0]}"

    def feature(self, f: Feature) -> str:
        text = f"{_zh_rel(f.relation, f.anchor.zh)}的{f.component.zh}"
        if f.material:
            text += f"，所述{f.component.zh}由{f.material.zh}制成"
        if f.function:
            text += f"，所述{f.component.zh}用于{f.function.zh}"
        return text

    def claim(self, inv: Invention, c: ClaimSpec) -> str:
        d = inv.device.zh
        if c.kind == "device":
            items = [inv.base.zh] + [self.feature(f) for f in inv.core]
            return f"{c.number}. 一种{d}，{self.intro}：{'；'.join(items[:-1])}；以及{items[-1]}。"
        if c.kind == "method":
            steps = [f"{s.zh}{comp.zh}" for s, comp in inv.method_steps]
            return (
                f"{c.number}. 一种用于{inv.purpose.zh}的方法，其特征在于，包括以下步骤："
                f"{'；'.join(steps[:-1])}；以及{steps[-1]}。"
            )
        head = f"{c.number}. 根据{self.parents(c)}所述的{d}，其特征在于，"
        if c.kind == "feature":
            return f"{head}还包括{self.feature(c.feature)}。"
        if c.kind == "parameter":
            p = c.parameter
            unit = p.parameter.key
            return f"{head}所述{p.component.zh}的{p.parameter.zh}为{p.low}{unit}~{p.high}{unit}。"
        return f"{head}所述{d}用于{inv.purpose.zh}。"

    def title(self, inv: Invention) -> str:
        if inv.method_steps:
            return f"一种{inv.device.zh}及用于{inv.purpose.zh}的方法"
        return f"一种具有{inv.core[0].component.zh}和{inv.core[1].component.zh}的{inv.device.zh}"

    def abstract(self, inv: Invention, core: tuple[Feature, ...] | None = None) -> str:
        d = inv.device.zh
        core = inv.core if core is None else core
        parts = [inv.base.zh] + [
            f"{_zh_rel(f.relation, f.anchor.zh)}的{f.component.zh}" for f in core
        ]
        s = [
            f"本发明公开了一种{d}，属于{inv.field.zh}技术领域。",
            f"所述{d}包括{'、'.join(parts[:-1])}以及{parts[-1]}。",
        ]
        s += [f"所述{f.component.zh}由{f.material.zh}制成。" for f in core if f.material]
        s.append(f"通过上述结构，能够{inv.purpose.zh}。")
        return "".join(s)

    def description(self, inv: Invention, r: random.Random) -> str:
        d = inv.device.zh
        para = iter(range(1, 1000))
        p = lambda text: f"[{next(para):04d}] {text}"  # noqa: E731
        lines = [
            "技术领域",
            p(f"本发明涉及{inv.field.zh}领域，尤其涉及一种{d}。"),
            "背景技术",
            p(f"现有的{d}难以{inv.purpose.zh}，原因在于{inv.base.zh}与周边部件相互独立地设置。"),
            "发明内容",
            p(f"本发明的目的在于提供一种能够{inv.purpose.zh}的{d}。" + self.abstract(inv)),
            "具体实施方式",
            p(f"如图1所示，{d}1包括{inv.base.zh}10。"),
        ]
        numerals = {inv.base: 10}
        for i, f in enumerate(inv.core + inv.extras, start=2):
            numerals[f.component] = 10 * i
            pre, _, post = f.relation.zh.partition("|")
            text = f"{f.component.zh}{10 * i}{pre}{f.anchor.zh}{numerals.get(f.anchor, 10)}{post}。"
            if f.material:
                text += f"在本实施例中，{f.component.zh}{10 * i}由{f.material.zh}制成。"
            if f.function:
                text += f"{f.component.zh}{10 * i}用于{f.function.zh}。"
            lines.append(p(text))
        for prm in inv.parameters:
            mid = round((prm.low + prm.high) / 2, 1)
            u = prm.parameter.key
            lines.append(
                p(
                    f"{prm.component.zh}的{prm.parameter.zh}优选为{prm.low}{u}~{prm.high}{u}，例如{mid}{u}。"
                )
            )
        if inv.method_steps:
            steps = "，然后".join(f"{s.zh}{c.zh}" for s, c in inv.method_steps)
            lines.append(p(f"使用所述{d}的方法包括：{steps}。"))
        lines.append(p(f"通过上述结构，{d}1能够{inv.purpose.zh}。"))
        return "\n".join(lines)


class Japanese:
    lang = "ja"

    def __init__(self, r: random.Random):
        self.or_word = r.choice(["又は", "または"])
        self.range_word = r.choice(["～", "から", "乃至"])

    def parents(self, c: ClaimSpec) -> str:
        a, b = full_width(c.parents[0]), full_width(c.parents[-1])
        if c.style == "or":
            return f"請求項{a}{self.or_word}{b}"
        if c.style == "range":
            if self.range_word == "から":
                return f"請求項{a}から{b}までのいずれか一項"
            return f"請求項{a}{self.range_word}{b}のいずれか一項"
        return f"請求項{a}"

    def feature(self, f: Feature) -> str:
        made = f"{f.material.ja}からなり、" if f.material else ""
        return f"{made}前記{f.anchor.ja}{f.relation.ja}{f.component.ja}"

    def claim(self, inv: Invention, c: ClaimSpec) -> str:
        d = inv.device.ja
        head = f"【請求項{full_width(c.number)}】\n"
        if c.kind == "device":
            items = [inv.base.ja] + [self.feature(f) for f in inv.core]
            funcs = "".join(
                f"前記{f.component.ja}は、{f.function.ja}ように構成されている、\n"
                for f in inv.core
                if f.function
            )
            return head + "と、\n".join(items) + f"と\nを備え、\n{funcs}{d}。"
        if c.kind == "method":
            steps = [f"{comp.ja}を{s.ja}工程" for s, comp in inv.method_steps]
            return head + "と、\n".join(steps) + f"と\nを含む、{inv.purpose.ja}方法。"
        tail = f"、{self.parents(c)}に記載の{d}。"
        if c.kind == "feature":
            return head + f"{self.feature(c.feature)}をさらに備える" + tail
        if c.kind == "parameter":
            p = c.parameter
            u = p.parameter.key
            return (
                head
                + f"前記{p.component.ja}の{p.parameter.ja}が{p.low}{u}～{p.high}{u}である"
                + tail
            )
        return head + f"前記{d}は、{inv.purpose.ja}ように構成されている" + tail

    def title(self, inv: Invention) -> str:
        if inv.method_steps:
            return f"{inv.device.ja}および{inv.purpose.ja}方法"
        return f"{inv.core[0].component.ja}および{inv.core[1].component.ja}を備えた{inv.device.ja}"

    def abstract(self, inv: Invention, core: tuple[Feature, ...] | None = None) -> str:
        d = inv.device.ja
        core = inv.core if core is None else core
        parts = [inv.base.ja] + [f"前記{f.anchor.ja}{f.relation.ja}{f.component.ja}" for f in core]
        s = [
            f"【課題】{inv.purpose.ja}ことができる{d}を提供する。",
            f"【解決手段】{d}は、{'と、'.join(parts)}とを備える。",
        ]
        s += [f"{f.component.ja}は{f.material.ja}からなる。" for f in core if f.material]
        return "".join(s)

    def description(self, inv: Invention, r: random.Random) -> str:
        d = inv.device.ja
        para = iter(range(1, 1000))
        p = lambda text: f"【{full_width(f'{next(para):04d}')}】\n{text}"  # noqa: E731
        lines = [
            "【技術分野】",
            p(f"本発明は、{inv.field.ja}に関し、特に{d}に関する。"),
            "【背景技術】",
            p(
                f"従来の{d}では、{inv.base.ja}と周辺部品とが独立して配置されているため、{inv.purpose.ja}ことが困難であった。"
            ),
            "【発明の概要】",
            p(f"本発明の目的は、{inv.purpose.ja}ことができる{d}を提供することである。"),
            "【発明を実施するための形態】",
            p(f"図１に示すように、{d}１は、{inv.base.ja}１０を備える。"),
        ]
        numerals = {inv.base: 10}
        for i, f in enumerate(inv.core + inv.extras, start=2):
            numerals[f.component] = 10 * i
            n = full_width(10 * i)
            text = f"{f.component.ja}{n}は、{f.anchor.ja}{full_width(numerals.get(f.anchor, 10))}{f.relation.ja}ものである。"
            if f.material:
                text += f"本実施形態では、{f.component.ja}{n}は{f.material.ja}からなる。"
            if f.function:
                text += f"{f.component.ja}{n}は、{f.function.ja}ように構成されている。"
            lines.append(p(text))
        for prm in inv.parameters:
            u = prm.parameter.key
            mid = round((prm.low + prm.high) / 2, 1)
            lines.append(
                p(
                    f"{prm.component.ja}の{prm.parameter.ja}は、{prm.low}{u}～{prm.high}{u}であることが好ましく、例えば{mid}{u}である。"
                )
            )
        if inv.method_steps:
            steps = "、次いで".join(f"{c.ja}を{s.ja}" for s, c in inv.method_steps)
            lines.append(p(f"{d}を用いる方法では、{steps}。"))
        lines.append(p(f"以上の構成により、{d}１は{inv.purpose.ja}ことができる。"))
        return "\n".join(lines)


RENDERERS = {"en": English, "zh": Chinese, "ja": Japanese}


def render_patent(
    inv: Invention,
    claims: list[ClaimSpec],
    lang: str,
    r: random.Random,
    abstract_core: tuple[Feature, ...] | None = None,
) -> dict[str, str]:
    """Title, abstract, claims (numbered, one per line) and description in ``lang``.

    ``claims`` is the family's claim structure (identical for every member); ``r`` picks the
    member's phrasing variants; ``abstract_core`` (default: all of ``inv.core``) is what the
    abstract states of the core (the description's summary always states all of it).
    """
    renderer = RENDERERS[lang](r)
    return {
        "title": renderer.title(inv),
        "abstract": renderer.abstract(inv, abstract_core),
        "claims": "\n".join(renderer.claim(inv, c) for c in claims),
        "description": renderer.description(inv, r),
    }
