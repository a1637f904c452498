"""What a sentence asserts: its form (statement, question, command, acknowledgement) and,
for a statement that sets something, which setting (the *slot*) and which value.

Supersession compares statements by meaning rather than by cue words: "The retry cap
is 3.", "Let's make the retry cap 5." and "重试上限换成5次吧" all give a value to the
slot ``{retry, cap}``.  A statement is parsed by masking its values (numbers with their
unit, codes and tags, quoted text, capitalised names, any Latin run inside Chinese) and
by splitting at the word that links a subject to its value (a copula, "use V for S",
"set S to V", 是/为/用/改成 …).  What is left, minus function words and the light verbs
every language uses to announce a setting ("make", "set", "switch", 改成, 应该), is the
slot.  Clauses led by a negation ("not Z", "instead of Z", "不要用Z") contribute the
values they reject.  The rules are grammatical, not a vocabulary of any domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from beeweave_core.text import language as L
from beeweave_core.text import segment

# ------------------------------------------------------------------ values
_MARK_L, _MARK_R = "\ue000", "\ue001"
_VALUE_SPANS = re.compile(
    r"\"[^\"\n]{1,120}\"|`[^`\n]{1,120}`|“[^”\n]{1,120}”|「[^」\n]{1,120}」"  # quoted
    r"|\b[a-z][a-z0-9+.-]*://[^\s\"'<>，。）)]+"  # URL
    r"|[#@][\w][\w./-]*"  # tags, channels, handles
    # numbers, ranges, times and money, with one unit word
    r"|(?<![A-Za-z0-9_])[$€£¥]?\d[\d,.:]*(?:[kKmM%]\b)?(?:\s*(?:-|–|~|to|到|至)\s*[$€£¥]?\d[\d,.:]*(?:[kKmM%]\b)?)?"
    r"(?:\s?(?:(?![A-Za-z]+ed\b|(?:is|are|was|were|be|the|a|an|and|or|for|to|at|in|on|of|per|by|with|"
    r"not|but|instead|now)\b)[A-Za-z]+|[个次条行秒分钟小时天周月年元人份名题]{1,2}))?"
)
#: "Sample 3 …", "Room 204 …": a number right after the opening noun names *which* one.
_NAMED_BY_NUMBER = re.compile(r"^\s*([A-Za-z]+)\s+(\d+)\b")
_CODE = re.compile(r"[A-Za-z_$][\w$]*(?:[./:\-][\w$]+)+|[A-Za-z_$][\w$]*")
_CAPITALISED = re.compile(r"(?<=[\s(])[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")
_LATIN_RUN = re.compile(r"[A-Za-z0-9$#@_][A-Za-z0-9$#@_.,:/+%' -]*[A-Za-z0-9%]|[A-Za-z0-9]")
_ZH_VALUES = re.compile(f"{_VALUE_SPANS.pattern}|{_LATIN_RUN.pattern}")
_PLACEHOLDER = re.compile(f"{_MARK_L}(\\d+){_MARK_R}")
_TOKEN = re.compile(f"{_MARK_L}\\d+{_MARK_R}|[^\\W_]+|[=:：]")

# --------------------------------------------------------------- function words
#: Words that announce or frame a setting in any domain: light verbs, modals, discourse
#: markers.  They never name *what* is set, so they are not part of a slot.
_FRAME_EN = frozenset(
    """let lets us make set use using used change changed changing switch switched
    move moved go going goes forward from now on onwards should must will would shall
    be is are was were been being become becomes becoming equal equals stay stays
    remain remains keep kept actually instead rather plan plans update updated new old
    currently today then please ok okay so well also just still need needs want wants
    i we you our my your let's pick choose chose take prefer bump raise lower increase
    decrease reduce up down over correction correct fine sure right yes no not never
    don't do does did can could may might here there going moving switching changing
    setting making bumping re ll ve d""".split()  # noqa: SIM905
)
_FRAME_ZH = frozenset(
    """其实 应该 应当 方案 调整 换成 改成 改为 改用 设为 设成 定为 调整为 变更为 更换为
    用 使用 采用 不要 不用 别 不再 现在 以后 今后 吧 了 就 那 那么 还是 我们 一下 为 是
    等于 改 换 设 定 请 好 好的 嗯 也 再 都 这个 那个 而 不是 而是 最好 要 得""".split()  # noqa: SIM905
)
_EN_COPULA = frozenset(["is", "are", "be", "becomes", "become", "equals", "stays", "remains", "="])
_EN_USE = frozenset(["use", "using", "pick", "choose", "take", "prefer"])
_EN_FOR = frozenset({"for", "as"})
_EN_TO = frozenset({"to", "at"})
_ZH_SEP = frozenset(
    """是 为 用 使用 采用 改成 换成 改为 改用 改到 调到 调成 调整到 设为 设成 设在 定为 定在
    调整为 变更为 更换为 等于 应为""".split()  # noqa: SIM905
)
_DETERMINERS = frozenset(
    ["the", "a", "an", "our", "my", "your", "this", "that", "its", "their", "his", "her"]
)
_SUBJECTLESS = frozenset(
    """the a an this that these those my our your their his her its we i you they he she
    it there here what which who how why when where""".split()  # noqa: SIM905
)
_NEGATION = re.compile(
    r"^(?:not|never|no longer|instead of|rather than|but not|and not|don't|do not|stop)\b"
    r"|^(?:不要再?用?|不用再?|别再?用?|不再用?|而不是|不是)",
    re.I,
)
_INLINE_NEGATION = re.compile(
    r"\b(?:instead of|rather than|no longer|not)\b|而不是|而非|不要再?用?|不用再?|别再?用|不再用?",
    re.I,
)
#: "from 3 to 7", "从3次改成7次": the value after *from* is the one being left.
_FROM_TO = re.compile(
    r"\bfrom\s+(?P<old>[^,;]+?)\s+(?=to\b)|从(?P<zold>[^，。；]+?)(?=改成|改为|换成|调到|改到|到)",
    re.I,
)
_PAST = re.compile(r"\b(?:was|were|had|did)\b", re.I)
_CLAUSE = re.compile(r"(?<!\d)[,;]\s+|(?<=\d),\s+(?=\D)|[，；。]|\s+—\s+")


def _stem(word: str) -> str:
    """Plural and case folded away, so "samples" and "sample" are one slot word."""
    w = word.casefold()
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and w.isascii():
        w = w[:-1]
    return w


def _atom(value: str) -> str:
    return L.bare_number(L.fold(value)).strip(" .,;:\"'`“”「」")


@dataclass(frozen=True)
class Setting:
    """One clause that gives (or rejects) a value for a slot."""

    text: str
    slot: frozenset[str]  # the words naming what is set
    words: frozenset[str]  # every content word of the clause group (slot, values, rest)
    values: frozenset[str]  # value atoms asserted
    negated: frozenset[str]  # value atoms rejected ("not Z", "不要用Z")
    residue: frozenset[str]  # content words that are neither slot nor value nor framing
    linked: bool  # a copula / use-for / set-to link joined slot and value
    narrative: bool = False  # a report of the past ("the fan was noisy"), not a setting

    @property
    def is_setting(self) -> bool:
        """Names a setting and gives it a value; an unlinked statement ("make the sauce
        base tomato") may carry its value among its words."""
        if self.narrative or not self.slot:
            return False
        return bool(self.values or self.negated or not self.linked)

    @property
    def terms(self) -> frozenset[str]:
        """Slot words plus the words inside values: what a slot is looked for in."""
        inside = {w for v in self.values for w in v.split()}
        return self.slot | self.words | frozenset(inside)


def _mask(text: str) -> tuple[str, list[str]]:
    """``text`` with every value span replaced by a placeholder, and the values."""
    values: list[str] = []

    def put(m: re.Match[str]) -> str:
        values.append(m.group().strip())
        return f" {_MARK_L}{len(values) - 1}{_MARK_R} "

    if L.has_cjk(text):  # any Latin run inside Chinese is a value (a name, a code)
        return _ZH_VALUES.sub(put, text), values
    named = _NAMED_BY_NUMBER.match(text)
    if named and not _function(named.group(1)):
        ident = "".join(chr(0x2170 + int(d)) for d in named.group(2))  # one letter-like word
        text = f"{named.group(1)}{ident}{text[named.end() :]}"
    out = _VALUE_SPANS.sub(put, text)
    out = _CODE.sub(lambda m: put(m) if _strong(m.group()) else m.group(), out)
    out = _CAPITALISED.sub(lambda m: m.group() if _function(m.group().split()[0]) else put(m), out)
    return out, values


def _strong(tok: str) -> bool:
    return tok.strip(".:-/") in L.identifiers(tok)


def _tokens(masked: str) -> list[str]:
    return _TOKEN.findall(segment.segment(masked, for_index=False))


def _content(toks: list[str], values: list[str]) -> tuple[set[str], set[str]]:
    """(content words, value atoms) of a token run."""
    words: set[str] = set()
    atoms: set[str] = set()
    for t in toks:
        m = _PLACEHOLDER.fullmatch(t)
        if m:
            atoms.add(_atom(values[int(m.group(1))]))
        elif not _function(t):
            # Chinese words by character: segmentation shifts with what follows
            # ("时长是" / "时长换成"), the characters of a name do not
            words.update(t if L.has_cjk(t) else [_stem(t)])
    return words, atoms


def _function(tok: str) -> bool:
    t = tok.casefold()
    return (
        t in segment.STOPWORDS
        or t in L.ZH_STOPWORDS
        or t in _FRAME_EN
        or t in _FRAME_ZH
        or t in "=:："
        or t.isdigit()
        or len(t) == 1
        and t.isascii()
    )


def _split(toks: list[str]) -> tuple[list[str], list[str]] | None:
    """(slot tokens, value tokens) at the word linking them, if the clause has one."""
    low = [t.casefold() for t in toks]
    heads = [i for i, t in enumerate(low) if not _function(t) or t in _EN_USE]
    first = heads[0] if heads else 0
    if low and low[first] in _EN_USE:  # "use V for S"
        for j in range(first + 1, len(low)):
            if low[j] in _EN_FOR:
                return toks[j + 1 :], toks[first + 1 : j]
    for i, t in enumerate(low):
        if t in (":", "：") and not any(not _function(w) for w in low[:i]):
            return _split(toks[i + 1 :])  # "Change of plan: …" only frames what follows
        if t in _EN_COPULA or t in _ZH_SEP or t in (":", "："):
            left, right = toks[:i], toks[i + 1 :]
            if left and right and low[0] not in _DETERMINERS and right[0].casefold() == "the":
                return right, left  # "Teams is the interview platform": the role is the slot
            return left, right
    if low and low[0] not in _SUBJECTLESS:  # "set S to V", "keep S at V"
        for j in range(1, len(low)):
            if low[j] in _EN_TO:
                return toks[:j], toks[j + 1 :]
    return None


def _parse_clause(clause: str) -> tuple[set[str], set[str], set[str], bool]:
    """(slot words, value atoms, other content words, linked) of one clause."""
    masked, values = _mask(clause)
    toks = _tokens(masked)
    split = _split(toks)
    if split is None:
        slot, atoms = _content(toks, values)
        return slot, atoms, set(), False
    slot, slot_atoms = _content(split[0], values)
    val_words, atoms = _content(split[1], values)
    if not slot and slot_atoms and val_words and not atoms:  # "Zoom will be the platform"
        slot, val_words, atoms, slot_atoms = val_words, set(), slot_atoms, set()
    if not atoms:  # a plain word is the value: "the source schema is public"
        atoms, val_words = val_words, set()
    # a value before the link names *which* one ("the dessert for table 9 is …")
    return slot | slot_atoms, atoms, val_words, True


def settings(sentence: str) -> list[Setting]:
    """The settings one sentence states; a negated clause joins the clause before it."""
    groups: list[list[tuple[str, bool]]] = []
    for raw in _CLAUSE.split(sentence or ""):
        clause = raw.strip()
        if not clause:
            continue
        left = _FROM_TO.search(clause)
        extra = []
        if left is not None:
            extra = [(left.group("old") or left.group("zold") or "", True)]
            clause = clause[: left.start()] + clause[left.end() :]
        neg = _NEGATION.search(clause)
        inline = _INLINE_NEGATION.search(clause)
        if neg is None and inline is not None:  # "use X instead of Y for Z"
            head, tail = clause[: inline.start()], clause[inline.end() :]
            parts = [(head, False), (tail, True)]
        else:
            parts = [(clause[neg.end() :] if neg else clause, neg is not None)]
        parts += extra
        for text, negated in parts:
            if negated and groups:
                groups[-1].append((text, True))
            else:
                groups.append([(text, negated)])
    out = [_setting(g) for g in groups]
    return _attach_lead_ins([s for s in out if s is not None])


def _narrative(clause: str) -> bool:
    """A report of what happened: a past auxiliary, or a past-tense verb in a clause that
    does not open with a verb of setting ("Hiring managers liked the new scorecard")."""
    if _PAST.search(clause):
        return True
    words = re.findall(r"[A-Za-z']+", clause)
    if not words or words[0].casefold() in _FRAME_EN or _split(_tokens(_mask(clause)[0])):
        return False
    return any(len(w) > 4 and w.casefold().endswith("ed") for w in words[1:])


def _setting(group: list[tuple[str, bool]]) -> Setting | None:
    slot: set[str] = set()
    values: set[str] = set()
    negated: set[str] = set()
    words: set[str] = set()
    residue: set[str] = set()
    linked = False
    narrative = any(_narrative(t) for t, neg in group if not neg)
    for text, neg in group:
        s, atoms, rest, link = _parse_clause(text)
        words |= s | rest | {a for a in atoms if a.isalpha()}
        if neg:  # everything a negated clause names is what it rejects
            negated |= atoms | rest | s
            words |= s
            continue
        linked = linked or link
        slot |= s
        values |= atoms
        residue |= rest
    text = " ".join(t for t, _ in group).strip()
    if not (slot or values or negated):
        return None
    if not slot and all(neg for _, neg in group):  # "Don't use Z for the X."
        slot = set().union(*(_parse_clause(t)[0] for t, _ in group))
        negated -= slot
    return Setting(text, frozenset(slot), frozenset(words | slot), frozenset(values),
                   frozenset(negated - values), frozenset(residue), linked, narrative)  # fmt: skip


def _attach_lead_ins(found: list[Setting]) -> list[Setting]:
    """ "Interview platform: Zoom" → a slot-only clause and a value-only clause make one."""
    out: list[Setting] = []
    for s in found:
        if out and not s.slot and (s.values or s.negated) and out[-1].slot and not out[-1].values:
            p = out.pop()
            s = Setting(f"{p.text}: {s.text}", p.slot, p.words | s.words, s.values,
                        p.negated | s.negated, p.residue | s.residue, True, p.narrative)  # fmt: skip
        out.append(s)
    return [s for s in out if s.slot or s.negated]


# ------------------------------------------------------------------ sentence form
_EN_AUX = frozenset(
    """is are was were do does did can could should would will shall may might have has
    had am isn't aren't don't doesn't didn't""".split()  # noqa: SIM905
)
#: At most this many content words (values aside) in a subject-less one-off request.
_COMMAND_WORDS = 2
_ZH_REQUEST = re.compile(r"^(?:请|麻烦|帮我|帮忙|给我|先|再)|一下")
_ZH_DURABLE = re.compile(r"必须|务必|一律|始终|总是|永远|以后|今后|不要|不能|不得|禁止|只能")


def is_question(sentence: str) -> bool:
    """A question by its form: a question mark, 吗/呢 at the end, or an English
    sentence that opens with an interrogative or an inverted auxiliary."""
    t = (sentence or "").strip()
    if L.is_question(t):
        return True
    first = t.split(maxsplit=1)[0].casefold() if t.split() else ""
    return not L.has_cjk(t) and first in _EN_AUX and len(t.split()) > 2 and not t.endswith(".")


def is_command(sentence: str) -> bool:
    """A request for an action now ("Inspect orders_3.", "请检查一下日志"), not a lasting
    instruction: subject-less, with no link from a setting to a value and no word that
    makes it hold over time ("always", "never", "must", 一律, 以后 …)."""
    t = (sentence or "").strip()
    if not t or L.CONSTRAINT.search(t) or L.PREFERENCE.search(t):
        return False
    if L.is_transient(t):
        return True
    if L.has_cjk(t):
        return bool(_ZH_REQUEST.search(t)) and not _ZH_DURABLE.search(t) and not _linked(t)
    words = re.findall(r"[A-Za-z']+", t)
    if not words or words[0].casefold() in _SUBJECTLESS or words[0].casefold() in _EN_AUX:
        return False
    first = words[0].casefold()
    if first in ("let's", "lets", "let"):  # a proposal the user decides, not a request
        return False
    if first == "please" and len(words) > 1:
        first = words[1].casefold()
    if first in _SUBJECTLESS or t.split()[0][:1].isdigit():
        return False
    low = {w.casefold() for w in words}
    if low & _EN_COPULA:  # "Redshift is the target" has a subject and a verb
        return False
    # a rule names a kind of thing and how to treat it ("fill missing values with the
    # column mean"); a one-off request is short ("restart the runner", "check X")
    content = {_stem(w) for w in words if not _function(w)}
    return len(content) <= _COMMAND_WORDS and not _linked(t)


def _linked(t: str) -> bool:
    """Gives a value to a named setting ("set the X to V", "make the oven timer 10 min")."""
    multiword = not L.has_cjk(t)  # Chinese slots count characters, not words
    return any(
        s.values and (s.linked and s.slot or multiword and len(s.slot) >= 2) for s in settings(t)
    )


def is_statement(sentence: str) -> bool:
    """Does the sentence state something that stays true (a fact or an instruction)?

    Not an acknowledgement ("ok, noted #11"), a question or a command for now; and it
    must name something: a content word besides its values and acknowledgement words.
    """
    t = (sentence or "").strip()
    if not t or L.is_ack(t) or is_question(t) or is_command(t):
        return False
    masked, _ = _mask(t)
    content = [w for w in _tokens(masked) if not _PLACEHOLDER.fullmatch(w) and not _function(w)]
    content = [w for w in content if not L.is_ack(w)]
    return bool(content)
