"""The English + Chinese rules that decide what in a conversation is worth keeping.

Every rule-based part of the context engine (editing, the extractive summarizer, the
memory writer, the working state, the retention check) reads text through these
functions, so "what counts as a number, an identifier, a constraint or a change of
plan" is decided once.  The rules are lexical on purpose: they run on every event,
offline, in microseconds — the cost that makes LLM-on-every-write memories slow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from beeweave_core.text.segment import STOPWORDS, has_cjk, tokens

# ----------------------------------------------------------------- splitting
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])\s*|\n+")
_CLAUSE_SEP = re.compile(r"(?<!\d),\s+|(?<=\d),\s+(?=\D)|;\s*|[，；]\s*|\s+—\s+")


def sentences(text: str) -> list[str]:
    """Sentences of ``text`` (a decimal point or ``robots.txt`` does not end one)."""
    parts = (p.strip() for p in _SENTENCE_END.split(text or ""))
    return [p for p in parts if p]


def clauses(sentence: str) -> list[str]:
    """Comma/semicolon clauses of one sentence; ``5,000`` stays one number."""
    parts = (p.strip() for p in _CLAUSE_SEP.split(sentence))
    return [p for p in parts if p]


def fold(text: str) -> str:
    """Case- and whitespace-folded form used for every "does X occur in Y" test."""
    return " ".join((text or "").casefold().split())


# ------------------------------------------------------------------ key values
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?\$?\d+(?:[,.]\d+)*%?(?![\w])|(?<=[^\x00-\x7f])\d+(?:[,.]\d+)*"
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"'<>，。）)]+", re.I)
_QUOTED = re.compile(
    r"\"([^\"\n]{1,120})\"|`([^`\n]{1,120})`|“([^”\n]{1,120})”|「([^」\n]{1,120})」"
)
_WORDISH = re.compile(r"[A-Za-z_$][\w$]*(?:[./:\-][\w$]+)+|[A-Za-z_$][\w$]*")


def _strong_identifier(tok: str) -> bool:
    """Codes a user would be annoyed to see changed: ``order_key_beta``,
    ``HarvestBot/7.4``, ``rates-usd-q3``, ``robots.txt``, ``SQLite``, ``JOB-7731``."""
    if len(tok) < 3:
        return False
    if "_" in tok.strip("_") or any(c in tok for c in "/:"):
        return any(ch.isalpha() for ch in tok)
    if "." in tok:
        return max(len(p) for p in tok.split(".")) > 1 and any(ch.isalpha() for ch in tok)
    if "-" in tok:
        return tok.count("-") >= 2 or any(c.isdigit() or c.isupper() for c in tok)
    has_digit = any(c.isdigit() for c in tok)
    has_alpha = any(c.isalpha() for c in tok)
    if has_digit and has_alpha:
        return True
    # internal capital after a lower-case letter (SQLite, HarvestBot, camelCase)
    return bool(re.search(r"[a-z][A-Z]|[A-Z]{2,}[a-z]", tok))


def numbers(text: str) -> list[str]:
    return [m.group().rstrip(".,") for m in _NUMBER.finditer(text or "")]


def identifiers(text: str) -> list[str]:
    out = []
    for m in _WORDISH.finditer(_URL.sub(" ", text or "")):
        tok = m.group().rstrip(".:-/")
        if _strong_identifier(tok):
            out.append(tok)
    return out


def quoted(text: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text or "")]


def urls(text: str) -> list[str]:
    return [m.group().rstrip(".,;") for m in _URL.finditer(text or "")]


def key_values(text: str) -> list[str]:
    """Exact values a summary must not lose: numbers, identifiers, quotes, URLs."""
    seen: dict[str, None] = {}
    folded: set[str] = set()
    for v in (*urls(text), *quoted(text), *identifiers(text), *numbers(text)):
        if v and fold(v) not in folded:
            seen[v] = None
            folded.add(fold(v))
    return list(seen)


def bare_number(v: str) -> str:
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", v)


_NUMERIC = re.compile(r"[-+]?\$?\d[\d,.]*%?")


def value_present(value: str, folded_text: str, bare_text: str | None = None) -> bool:
    """``value`` occurs in already-folded text; ``5,000`` and ``5000`` are one value.

    A number must occur as a whole number: ``7`` is not found in ``7450``.
    ``bare_text`` is ``bare_number(folded_text)`` when the caller checks many values
    against one text (computed once, not once per value).
    """
    fv = fold(value)
    if _NUMERIC.fullmatch(fv):
        pattern = r"(?<![\d.])" + re.escape(bare_number(fv)) + r"(?![\d]|\.\d)"
        bare = bare_text if bare_text is not None else bare_number(folded_text)
        return bool(re.search(pattern, bare))
    if fv in folded_text:
        return True
    if any(c.isdigit() for c in fv):
        bare = bare_text if bare_text is not None else bare_number(folded_text)
        return bare_number(fv) in bare
    return False


# ----------------------------------------------------------------------- cues
def _words(*ws: str) -> str:
    return r"(?:^|\b)(?:" + "|".join(ws) + r")(?!\w)"


def _zh(*ws: str) -> str:
    return "|".join(ws)


ACK_EN = frozenset(
    [
        "ok",
        "okay",
        "k",
        "kk",
        "sure",
        "thanks",
        "thank",
        "you",
        "thx",
        "ty",
        "great",
        "nice",
        "cool",
        "good",
        "alright",
        "all",
        "right",
        "fine",
        "perfect",
        "sounds",
        "good",
        "got",
        "it",
        "go",
        "on",
        "continue",
        "proceed",
        "awesome",
        "yep",
        "noted",
        "understood",
        "lgtm",
        "please",
        "keep",
        "going",
        "carry",
        "on",
        "next",
        "sure",
        "thing",
        "will",
        "do",
        "right",
        "makes",
        "sense",
    ]
)
ACK_ZH = (
    "好的",
    "好",
    "可以",
    "行",
    "嗯",
    "继续",
    "收到",
    "明白了",
    "明白",
    "谢谢",
    "不错",
    "吧",
    "没问题",
    "好嘞",
    "对",
    "了",
    "那就",
    "这样",
    "知道了",
    "谢",
    "辛苦了",
    "很好",
    "棒",
)
_ACK_ZH_RUN = re.compile("^(?:" + "|".join(sorted(ACK_ZH, key=len, reverse=True)) + ")+$")
_PUNCT = re.compile(r"[\s\W_]+", re.U)

TRANSIENT = re.compile(
    r"^(?:please\s+)?(?:run it|go ahead|try again|do it|run that|execute it|start)\W*$"
    r"|^(?:请)?(?:运行一下|跑一下|执行一下|试一下|开始吧?)\W*$",
    re.I,
)
CONSTRAINT = re.compile(
    _words(
        "must",
        "should",
        "shall",
        "needs? to",
        "has to",
        "have to",
        "required?",
        "never",
        "always",
        "only",
        "at most",
        "at least",
        "no (?:more|less|later|longer|fewer) than",
        "not (?:longer|more|later)",
        "limit",
        "maximum",
        "minimum",
        "max",
        "min",
        "non-negotiable",
        "mandatory",
        "do not",
        "don't",
        "cannot",
        "can't",
        "avoid",
        "make sure",
        "ensure",
        "within",
    )
    + "|"
    + _zh(
        "必须",
        "务必",
        "一定要",
        "不能",
        "不要",
        "不得",
        "禁止",
        "只能",
        "只用",
        "一律",
        "至少",
        "最多",
        "不超过",
        "以内",
        "限速",
        "限制",
        "要求",
        "应该",
        "需要",
    ),
    re.I,
)
IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?:use|store|save|write|read|keep|set|fill|limit|send|call|deduplicate|"
    r"dedupe|partition|make|add|remove|exclude|include|put|name|log|retry|cache|encrypt|"
    r"compress|schedule|format|sort|group|filter|validate|export|load|parse|fetch|return|"
    r"respond|reply|answer|cap|run|switch|replace|drop|rename|enable|disable|prefer|target|"
    r"output|emit|persist|respect|skip|ignore|treat|convert|round|timeout|tag|label)\b"
    r"|^.{0,24}?(?:用|使用|采用|设为|设置为|作为|按|存到|存成|写成|保留|改用|改成)",
    re.I,
)
DECISION = re.compile(
    _words(
        "change of plan",
        "actually",
        "instead",
        "let's",
        "let us",
        "we'll",
        "we will",
        "go with",
        "decided",
        "decision",
        "switch(?:ed)? to",
        "from now on",
        "going forward",
        "no longer",
        "cancel",
        "scratch that",
        "never mind",
        "drop",
        "settle on",
        "agreed",
    )
    + "|"
    + _zh(
        "决定",
        "改一下",
        "方案调整",
        "改用",
        "改成",
        "换成",
        "不再",
        "不用",
        "就用",
        "定为",
        "取消",
        "算了",
        "以后",
        "从现在起",
        "确定",
    ),
    re.I,
)
PREFERENCE = re.compile(
    _words(
        "prefer",
        "i like",
        "i'd like",
        "i would like",
        "i love",
        "i hate",
        "i dislike",
        "my favou?rite",
        "please always",
        "i'd rather",
        "i would rather",
    )
    + "|"
    + _zh("喜欢", "偏好", "更喜欢", "希望", "习惯", "讨厌"),
    re.I,
)
REASON = re.compile(
    r"\b(?:because|since|so that|due to|given that|the reason is)\b\s*(?P<r>[^.;]+)"
    r"|(?:因为|由于|考虑到|为了)(?P<rz>[^。；]+)",
    re.I,
)
TODO = re.compile(
    _words(
        "todo",
        "to-do",
        "next step",
        "remaining",
        "still need",
        "still have to",
        "will need to",
        "follow up",
        "pending",
    )
    + "|"
    + _zh("待办", "接下来", "下一步", "之后再", "还需要", "还要", "后续", "稍后"),
    re.I,
)
CLOSING = re.compile(
    _words(
        "that's all",
        "that is all",
        "wrap up",
        "wrap it up",
        "we're done",
        "all done",
        "bye",
        "goodbye",
        "final summary",
        "summari[sz]e everything",
    )
    + "|"
    + _zh("总结一下", "收尾", "就这样吧", "结束", "最后总结"),
    re.I,
)
GOAL = re.compile(
    _words(
        "i need",
        "i want",
        "help me",
        "we need",
        "goal",
        "build",
        "create",
        "set up",
        "implement",
        "write a",
        "make a",
    )
    + "|"
    + _zh("我需要", "我想", "帮我", "目标", "搭建", "实现", "需要一个"),
    re.I,
)
_QUESTION = re.compile(r"[?？]\s*$|[吗呢]\s*。?$|^(?:what|which|how|why|when|where|who)\b", re.I)


def is_ack(text: str) -> bool:
    """A pure acknowledgement ("ok", "sounds good", "好的", "行，继续吧") with nothing else."""
    t = (text or "").strip()
    if not t or len(t) > 40:
        return False
    if has_cjk(t):
        return bool(_ACK_ZH_RUN.match(_PUNCT.sub("", t)))
    words = _PUNCT.sub(" ", t.casefold()).split()
    if not words:
        return True
    joined = " ".join(words)
    if joined in ACK_EN:
        return True
    i = 0
    while i < len(words):  # greedy: every word (or known pair) must be an ack word
        pair = " ".join(words[i : i + 2])
        if pair in ACK_EN:
            i += 2
        elif words[i] in ACK_EN:
            i += 1
        else:
            return False
    return True


def is_transient(text: str) -> bool:
    """A request about *now* ("please run it", "请运行一下"): no lasting content."""
    return bool(TRANSIENT.match((text or "").strip()))


def is_question(text: str) -> bool:
    return bool(_QUESTION.search((text or "").strip()))


def reason_of(text: str) -> str | None:
    m = REASON.search(text or "")
    if not m:
        return None
    r = (m.group("r") or m.group("rz") or "").strip(" ,.。")
    return r or None


# ------------------------------------------------------------ change of plan
_STOP_LEADS = re.compile(r"^(?:the|a|an|using|use|our|my|this|that|to|with)\s+", re.I)
_TERMINATOR = re.compile(
    r"\s*(?:[:;。；，]|[,.](?:\s|$)|\s+(?:and|but|because|since|as|so|for|—|-)\s|\s*$)"
)
_NEGATED_EN = re.compile(
    r"\b(?:drop(?:ping)?|instead of|rather than|no longer(?: use| using| need| want)?|"
    r"(?:don't|do not|stop|quit|let's not|let us not|won't|will not|never) (?:use|using)|"
    r"forget(?: about)?|cancel|scratch|get rid of|remove)\s+(?=(?P<x>.+))",
    re.I,
)
_REPLACED_EN = re.compile(
    r"\b(?:replace|switch(?:ing)? from|move away from|migrate from)\s+(?P<x>.+?)\s+(?:with|by|to)\b",
    re.I,
)
_NOT_ANYMORE = re.compile(
    r"\bnot\s+(?:use\s+|using\s+)?(?P<x>[^,.;:]{1,60}?)\s+any ?(?:more|longer)\b", re.I
)
_NEGATED_ZH = re.compile(
    r"(?:不再(?:用|使用|采用)?|不用再?|别(?:再)?用|不要再?用|取消|把)\s*"
    r"(?P<x>[^，。；,;：:\s]+?)\s*(?:了|改成|换成|改为|，|。|；|,|$)"
)
#: Words that name the thing rather than what it is ("the SQLite *plan*").
_GENERIC_TAIL = re.compile(
    r"\s+(?:plan|idea|approach|option|setting|part|thing|one|step|rule|bit|after all|"
    r"any ?more|for now|entirely|completely)$",
    re.I,
)


_PRONOUNS = frozenset({"that", "it", "this", "them", "those", "these", "everything", "what i said"})


def _cut_phrase(rest: str) -> str:
    m = _TERMINATOR.search(rest)
    phrase = rest[: m.start()] if m else rest
    phrase = phrase.strip(" \"'`“”")
    while True:
        stripped = _GENERIC_TAIL.sub("", _STOP_LEADS.sub("", phrase)).strip()
        if stripped == phrase:
            break
        phrase = stripped
    return phrase


def overturned_terms(text: str) -> list[str]:
    """What an explicit change of plan says is no longer wanted.

    "Actually, drop SQLite: …" → ``["SQLite"]``; "… median instead of the mean" →
    ``["mean"]``; "不用 SQLite 了" → ``["SQLite"]``; "不再用均值" → ``["均值"]``.
    """
    out: list[str] = []
    for m in _NEGATED_EN.finditer(text or ""):
        phrase = _cut_phrase(m.group("x"))
        if phrase:
            out.append(phrase)
    out += [_cut_phrase(m.group("x")) for m in _REPLACED_EN.finditer(text or "")]
    out += [_cut_phrase(m.group("x")) for m in _NOT_ANYMORE.finditer(text or "")]
    out += [m.group("x").strip() for m in _NEGATED_ZH.finditer(text or "")]
    seen: dict[str, None] = {}
    for p in out:
        if (
            p
            and len(p) <= 60
            and fold(p) not in _PRONOUNS
            and fold(p) not in (fold(s) for s in seen)
        ):
            seen[p] = None
    return list(seen)


# --------------------------------------------------------------- similarity
ZH_STOPWORDS = frozenset(
    [
        "的",
        "了",
        "是",
        "在",
        "和",
        "与",
        "就",
        "都",
        "也",
        "要",
        "把",
        "用",
        "吧",
        "呢",
        "吗",
        "啊",
        "我们",
        "你",
        "我",
        "他",
        "这",
        "那",
        "个",
        "一",
        "之",
        "并",
        "而",
        "及",
        "或",
        "被",
        "让",
        "给",
        "会",
        "能",
        "很",
    ]
)


def terms(text: str) -> list[str]:
    """Content terms (stopwords out), Chinese segmented: what similarity compares."""
    return [t for t in tokens(text or "") if t not in STOPWORDS and t not in ZH_STOPWORDS]


def slot_terms(text: str) -> set[str]:
    """Terms that say *what* a statement is about, with its values left out."""
    values = {fold(v) for v in key_values(text)}
    vals_tokens = {t for v in values for t in tokens(v)}
    return {t for t in terms(text) if t not in vals_tokens and not t.isdigit()}


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


def overlap(a: Iterable[str], b: Iterable[str]) -> tuple[int, float]:
    """(shared terms, overlap coefficient |A∩B| / min(|A|, |B|))."""
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return 0, 0.0
    n = len(sa & sb)
    return n, n / min(len(sa), len(sb))


def mentions(phrase: str, text: str) -> bool:
    """Does ``text`` talk about ``phrase``?  Whole words, or the phrase's values, or
    most of its content words ("the 17 second timeout" ~ "time out after 17 seconds")."""
    if contains_term(phrase, text):
        return True
    values = [v for v in key_values(phrase)]
    if values:
        return all(value_present(v, fold(text)) for v in values)
    pt = set(terms(phrase))
    if len(pt) < 2:
        return False
    return len(pt & set(terms(text))) * 3 >= 2 * len(pt)


def contains_term(phrase: str, text: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words (Latin) or as a substring (CJK)."""
    if has_cjk(phrase):
        return fold(phrase) in fold(text)
    pattern = r"(?<![\w-])" + re.escape(fold(phrase)) + r"(?![\w-])"
    return bool(re.search(pattern, fold(text)))


# ------------------------------------------------------------ constraint phrases
_BOUND = re.compile(
    r"(?P<cue>\b(?:at most|no more than|no longer than|not longer|up to|within|under|max(?:imum)?|"
    r"at least|no less than|min(?:imum)?)\b|不超过|最多|以内|至少|不少于|不能更长)",
    re.I,
)
_UPPER = (
    "at most",
    "no more than",
    "no longer than",
    "not longer",
    "up to",
    "within",
    "under",
    "max",
    "不超过",
    "最多",
    "以内",
    "不能更长",
    "<=",
    "≤",
    "<",
)
_LOWER = ("at least", "no less than", "min", "至少", "不少于", ">=", "≥", ">")
_NEGATION = re.compile(
    r"\b(?:never|do not|don't|must not|mustn't|cannot|can't|not)\b|不能|不要|不得|禁止|别", re.I
)


@dataclass(frozen=True)
class KeyValue:
    """One thing the retention check looks for in a summary."""

    kind: str  # value | bound | negation
    text: str
    need: tuple[str, ...] = ()

    def present(self, folded: str, bare: str | None = None) -> bool:
        if self.kind == "value":
            return value_present(self.text, folded, bare)
        if self.kind == "bound":
            cues = _UPPER if fold(self.text).startswith(tuple(fold(c) for c in _UPPER)) else _LOWER
            return any(fold(c) in folded for c in cues)
        # negation: some negation cue, and most of the object's content words
        if not _NEGATION.search(folded):
            return False
        hits = sum(1 for w in self.need if w in folded)
        return hits >= max(1, (len(self.need) + 1) // 2)


def retention_keys(text: str) -> list[KeyValue]:
    """Numbers, identifiers, quoted strings and constraint phrases of ``text``."""
    keys = [KeyValue("value", v) for v in key_values(text)]
    for s in sentences(text):
        for m in _BOUND.finditer(s):
            keys.append(KeyValue("bound", m.group("cue")))
        m = _NEGATION.search(s)
        if m and CONSTRAINT.search(s):
            obj = [t for t in terms(s[m.end() :])][:4]
            if obj:
                keys.append(KeyValue("negation", s[m.start() : m.end() + 40].strip(), tuple(obj)))
    uniq: dict[tuple[str, str], KeyValue] = {}
    for k in keys:
        uniq.setdefault((k.kind, fold(k.text)), k)
    return list(uniq.values())


def missing_keys(source: str, summary: str, keys: Sequence[KeyValue] | None = None) -> list[str]:
    folded = fold(summary)
    bare = bare_number(folded)
    return [
        k.text
        for k in (keys if keys is not None else retention_keys(source))
        if not k.present(folded, bare)
    ]
