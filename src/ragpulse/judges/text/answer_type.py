"""What kind of answer a question asks for, and whether an answer gives that kind.

The expected answer type is the classic first step of question answering (Moldovan et al., 2000; Li & Roth,
2002): "how many" asks for a number, "how long" for a duration, "when" for a time, "why" for a reason, a
question opening with an auxiliary ("Can I …?", "Does …?") or ending in 吗 for yes or no. An answer that
gives the asked-for kind engages with the question even when it shares no word with it ("Staff get 12 days of
paid illness absence annually." for "How many sick days are employees allowed per year?").

"How do I …?" and 怎么/如何 ask for a procedure: an instruction ("Click …", "You can …", "请…", "在…页面…"), or
in Chinese a statement of when, where or by what means the question's verb is done ("提前8周在Workday申请。"
for "怎么申请育儿假？", :func:`states_procedure`). "What", "which" and "who" questions have no type here.
"""

from __future__ import annotations

import re

from ragpulse.judges.text.checks import is_negation
from ragpulse.judges.text.lexical import QUESTION_WORDS
from ragpulse.judges.text.tokens import content_tokens, tokens

__all__ = [
    "asked_type",
    "gives_type",
    "stance_rest",
    "states_procedure",
    "states_yes_no_question",
    "strip_stance",
    "takes_stance",
]

_EN_TYPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("frequency", re.compile(r"^\s*how often\b", re.I)),
    ("duration", re.compile(r"^\s*how long\b", re.I)),
    ("number", re.compile(r"^\s*how (?:many|much)\b", re.I)),
    ("time", re.compile(r"^\s*(?:when|what time|what date|by when)\b", re.I)),
    ("reason", re.compile(r"^\s*(?:why|what causes|what is the reason)\b", re.I)),
    (
        "procedure",
        re.compile(r"^\s*(?:how (?:do|can|should|could) (?:i|we|you)|what should (?:i|we) do)\b", re.I),
    ),
    ("yesno", re.compile(r"^\s*(?:can|could|does|do|is|are|will|should|may|did|has|have|was|were)\b", re.I)),
)
_ZH_TYPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("frequency", re.compile(r"多久[^？?]{0,6}一次|多长时间[^？?]{0,6}一次")),
    ("duration", re.compile(r"多久|多长时间|几天|几个月|多少天")),
    ("time", re.compile(r"什么时候|何时|几点|哪天|哪一天|截止日期是")),
    ("number", re.compile(r"多少|几")),
    ("reason", re.compile(r"为什么|为何|什么原因|是什么原因")),
    ("procedure", re.compile(r"怎么(?!样)|如何|怎样(?!$)|怎么办")),
    ("yesno", re.compile(r"[吗么][？?]?\s*$|能否|是否|可否|有没有|是不是")),
)
_NUM = r"(?:\d+(?:[.,]\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|a|an|half|[一二两三四五六七八九十百千万半]+)"
_EN_UNIT = r"(?:second|minute|hour|day|week|fortnight|month|quarter|year)s?"
_GIVES: dict[str, re.Pattern[str]] = {
    # "no" is not a number ("No idea, …"); Chinese numerals are read from jieba's words (below), so that 一
    # inside 一起 or 一些 is not one
    "number": re.compile(
        r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
        r"hundred|thousand|million|none)\b",
        re.I,
    ),
    "duration": re.compile(
        rf"\b{_NUM}\s*(?:-|to)?\s*(?:{_NUM}\s*)?(?:business |working )?{_EN_UNIT}\b|"
        rf"{_NUM}\s*(?:个)?(?:秒|分钟|小时|天|周|星期|个月|月|年|工作日)",
        re.I,
    ),
    "frequency": re.compile(
        rf"\b(?:every|each|daily|weekly|monthly|yearly|annually|nightly|hourly|once|twice|"
        rf"per {_EN_UNIT})\b|每(?:天|周|月|年|晚|小时)|{_NUM}\s*次",
        re.I,
    ),
    "time": re.compile(
        rf"\d|\b(?:after|before|until|within|by|on|at|next|once|when|today|tomorrow|"
        rf"{_EN_UNIT}|january|february|march|april|may|june|july|august|september|october|"
        rf"november|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|"
        rf"[一二两三四五六七八九十]+(?:月|日|号|点)|之后|以后|之前|以前|后|前|内|下次|下个|明天|今天",
        re.I,
    ),
    "reason": re.compile(
        r"\b(?:because|due to|caused|causes|since|as a result|so that|reason)\b|因为|由于|"
        r"原因|导致|造成|是因为",
        re.I,
    ),
    # an instruction: a sentence opening with a verb of doing in the imperative, or "you can/need to/should"
    "procedure": re.compile(
        r"(?:^|[.;!]\s+)(?:please\s+)?(?:click|go|open|select|choose|use|install|download|add|enter|submit|fill|"
        r"tell|contact|report|raise|ask|send|update|log|sign|press|tap|bring|call|visit|follow|type|set|enable|"
        r"restart|run|invite|book|register|upload|reboot|apply)\b|\byou (?:can|need to|must|should|have to)\b|"
        r"(?:^|[。；，,]\s*)(?:请|点击|点|在[^。，]{1,12}(?:中|里|页面|设置|菜单|系统)|联系|登录|下载|安装|提交|填写|打开|"
        r"输入|选择|发|给|找|带上|由)",
        re.I,
    ),
    "yesno": re.compile(
        r"^\s*(?:yes|no|yeah|nope|sure|certainly|not)\b|^\s*(?:可以|不可以|不行|能|不能|是的|是|"
        r"不是|会|不会|有|没有|方便|不方便|对|不对)",
        re.I,
    ),
}


#: A Chinese word that is a number: a run of numerals, optionally with a measure word or unit (十六, 三个, 一周,
#: 两个月); 一起 ("together") and 一些 ("some") are words of their own, not numbers.
_ZH_NUMBER_WORD = re.compile(
    r"[一二两三四五六七八九十百千万亿半]+(?:个|周|天|月|年|次|人|名|位|岁|元|块|小时|分钟|秒|日|号|点|倍|家|件|项|"
    r"条|张|本|台|种|份|星期|个月|工作日)?"
)
_CJK_NUMERAL = re.compile(r"[一二两三四五六七八九十百千万亿半]")
#: A reply word that opens the answer to a yes/no question, set off by punctuation ("No, …", "是的，…", "不，…"):
#: the answer's stance, not part of its claim. The words are those of the yes/no answer type above and the
#: polarity words of the faithfulness judge.
_STANCE_OPENER = re.compile(
    r"^\s*(?:(?:yes|no|yeah|yep|nope|sure|certainly|correct|right|not really)|"
    r"(?:是的|对的|没错|不是|不对|不可以|不行|不能|不会|没有|可以|是|对|不|没|否|能|会|有))\s*[,，.。!！;；、]\s*",
    re.I,
)
_EN_STANCE_WORD = re.compile(r"^\s*(?:yes|no|yeah|yep|nope)\b", re.I)


def strip_stance(sentence: str) -> str:
    """``sentence`` without an opening reply word set off by punctuation ("No, contractors are not eligible …"
    → "contractors are not eligible …"; "是的，育儿假带薪。" → "育儿假带薪。")."""
    return _STANCE_OPENER.sub("", sentence, count=1)


def takes_stance(question: str, answer: str) -> bool:
    """True when ``answer`` takes a stance on the yes/no ``question``: it opens with a yes/no word ("No, …",
    "是的，…", "不，…") or holds a negation the question does not ("Contractors are not eligible …" for "Are
    contractors eligible …?"). Such an answer repeats the question's words because it answers it: it is not
    an echo."""
    if asked_type(question) != "yesno":
        return False
    if _STANCE_OPENER.match(answer) or _EN_STANCE_WORD.match(answer):
        return True
    asked = {t for t in tokens(question) if is_negation(t)}
    return any(is_negation(t) and t not in asked for t in tokens(answer))


def stance_rest(question: str, answer: str) -> str | None:
    """What ``answer`` says after the yes/no word it opens with ("Yes, the canteen serves pizza." → "the canteen
    serves pizza."; "Yes." → ""; "是的，带薪16周。" → "带薪16周。"), when ``question`` asks for yes or no;
    ``None`` when it does not, or the answer opens with no yes/no word."""
    if asked_type(question) != "yesno":
        return None
    m = _STANCE_OPENER.match(answer) or _EN_STANCE_WORD.match(answer)
    return None if m is None else answer[m.end() :]


#: A yes/no question's asking form: an opening auxiliary ("Are …?") or a Chinese question particle or
#: A-not-A form (…吗？, 是否, 能否, 有没有, 是不是).
_EN_AUX = re.compile(r"^\s*(can|could|does|do|is|are|will|should|may|did|has|have|was|were)\b", re.I)
_ZH_ASKING = re.compile(r"[吗么]\s*[？?]?\s*$|能否|是否|可否|有没有|是不是")


def states_yes_no_question(question: str, answer: str) -> bool:
    """True when ``answer`` is ``question`` (a yes/no question) turned into a statement, which affirms it:
    "Contractors are eligible for parental leave." for "Are contractors eligible for parental leave?",
    "育儿假带薪。" for "育儿假带薪吗？". The answer ends with a full stop and has lost the asking form: an English
    one holds the question's opening auxiliary, but not as its first word (do/does/did drop out of a
    statement: "The plan covers dental care."); a Chinese one has no 吗, 是否, 能否, 有没有, …. "Are contractors
    eligible for parental leave?" and a string of the question's words without a full stop
    ("contractors eligible parental leave") are not statements."""
    if asked_type(question) != "yesno":
        return False
    text = answer.strip()
    if not text.endswith((".", "。", "!", "！")):
        return False
    if re.search(r"[\u4e00-\u9fff]", question):
        return _ZH_ASKING.search(text.rstrip(".。!！")) is None
    m = _EN_AUX.match(question)
    if m is None or _EN_AUX.match(text):
        return False
    aux = m.group(1).lower()
    return aux in {"do", "does", "did"} or aux in tokens(text)


#: The Chinese cues of a procedure question; the question's verb is the content word after one ("怎么申请育儿假"
#: → 申请, "育儿假如何申请" → 申请).
_ZH_HOW = frozenset({"怎么", "如何", "怎样"})
#: Openers of a phrase saying when, where or by what means something is done: 提前 (in advance), 在 (at, in),
#: 通过 (through).
_ZH_MEANS = "(?:提前|在|通过)"


def states_procedure(question: str, answer: str) -> bool:
    """True when ``answer`` states how the Chinese procedure ``question`` is done: a clause that opens with
    提前, 在 or 通过 and ends with the question's verb, optionally followed by question words and 即可/就可以/
    就行 ("提前8周在Workday申请。" and "在Workday申请育儿假即可。" for "怎么申请育儿假？"). The verb must end
    the clause: "在职员工申请住房补贴需要三个月。" goes on about something else. English procedures are
    recognised by their instruction opening (:func:`gives_type`)."""
    if asked_type(question) != "procedure" or not re.search(r"[\u4e00-\u9fff]", question):
        return False
    words = tokens(question)
    content = set(content_tokens(question))
    verb = next(
        (
            w
            for i, w in enumerate(words)
            if i and words[i - 1] in _ZH_HOW and w in content and w not in QUESTION_WORDS
        ),
        None,
    )
    if verb is None or not re.search(r"[\u4e00-\u9fff]", verb):
        return False
    objects = "|".join(re.escape(w) for w in sorted(content - {verb}, key=len, reverse=True) if w)
    tail = f"(?:{objects})*" if objects else ""
    pattern = rf"{_ZH_MEANS}[^。，；！？,;!?]{{0,15}}?{re.escape(verb)}{tail}(?:即可|就可以|就行)?(?:[。，；！,;!.]|\s*$)"
    return re.search(pattern, answer) is not None


def asked_type(question: str) -> str | None:
    """The kind of answer ``question`` asks for (``number``, ``duration``, ``frequency``, ``time``,
    ``reason``, ``yesno``), or ``None``."""
    table = _ZH_TYPES if re.search(r"[\u4e00-\u9fff]", question) else _EN_TYPES
    for kind, pattern in table:
        if pattern.search(question):
            return kind
    return None


def gives_type(kind: str, answer: str) -> bool:
    """True when ``answer`` holds an answer of ``kind`` (a number, a duration, a yes or no opening, …)."""
    if _GIVES[kind].search(answer) is not None:
        return True
    if kind == "number" and _CJK_NUMERAL.search(answer):
        return any(_ZH_NUMBER_WORD.fullmatch(t) for t in tokens(answer))
    return False
