"""The built-in redactor: each kind found, verified where it has a checksum, and replaced by
a stable placeholder; look-alikes without a valid checksum are kept."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beeweave_core.governance import Detector, PIIRedactor, RedactorChain, load_secret
from beeweave_core.governance.redaction import (
    cn_resident_id_ok,
    iban_ok,
    luhn_ok,
    redact_value,
)

SECRET = b"k" * 32


def with_luhn(body: str) -> str:
    """``body`` plus the digit that makes it pass Luhn (built here, not copied)."""
    for d in "0123456789":
        if luhn_ok(body + d):
            return body + d
    raise AssertionError("unreachable")


def with_cn_check(first17: str) -> str:
    for c in "0123456789X":
        if cn_resident_id_ok(first17 + c):
            return first17 + c
    raise AssertionError("unreachable")


def with_iban_check(country: str, bban: str) -> str:
    for n in range(100):
        cand = f"{country}{n:02d}{bban}"
        if iban_ok(cand):
            return cand
    raise AssertionError("unreachable")


CARD = with_luhn("520082822828210")  # 16 digits
CN_ID = with_cn_check("11010519880607321")
IBAN = with_iban_check("DE", "370400440532013000")


def test_checksums_are_real():
    assert luhn_ok(CARD) and not luhn_ok(CARD[:-1] + str((int(CARD[-1]) + 1) % 10))
    assert cn_resident_id_ok(CN_ID) and not cn_resident_id_ok(CN_ID[:-1] + "Z")
    assert iban_ok(IBAN) and not iban_ok(IBAN[:2] + "00" + IBAN[4:])


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("write to nadia.orlov+billing@lumen-farms.co.uk today", "EMAIL", "nadia.orlov+billing@lumen-farms.co.uk"),
        (f"card {CARD[:4]} {CARD[4:8]} {CARD[8:12]} {CARD[12:]} was declined", "CARD", None),
        (f"refund to {IBAN[:4]} {IBAN[4:8]} {IBAN[8:12]} {IBAN[12:16]} {IBAN[16:20]} {IBAN[20:]}", "IBAN", None),
        (f"身份证号{CN_ID}，请核对", "CN_ID", CN_ID),
        ("手机 139 1234 5678 联系", "CN_MOBILE", "139 1234 5678"),
        ("call me at +44 20 7946 0321 after six", "PHONE", "+44 20 7946 0321"),
    ],
)  # fmt: skip
def test_each_kind_is_replaced(text, kind, value):
    redactor = PIIRedactor(SECRET)
    out, found = redactor.redact(text)
    assert found == Counter({kind: 1})
    assert re.search(rf"\[{kind}:[0-9a-f]{{8}}\]", out)
    if value is not None:
        assert value not in out
    bare = re.sub(r"\[[A-Z_]+:[0-9a-f]{8}\]", "", out).replace(" ", "")
    assert not re.search(r"\d{6,}", bare)  # no long digit run of the value is left


@pytest.mark.parametrize(
    "text",
    [
        "order ORD-2026-000731 shipped",
        "at 2026-11-30 14:05:11 the job ran",
        "tracking 1234567812345678 is pending",  # 16 digits, fails Luhn
        "version 10.4.2 of the pump firmware",
        "身份证号110105198806073210 无效",  # 18 digits, wrong check digit
        "the batch size is 5000 rows",
    ],
)
def test_look_alikes_are_kept(text):
    if "1234567812345678" in text:
        assert not luhn_ok("1234567812345678")
    out, found = PIIRedactor(SECRET).redact(text)
    assert (out, sum(found.values())) == (text, 0)


def test_placeholder_is_stable_per_value_and_secret():
    a, b = PIIRedactor(SECRET), PIIRedactor(SECRET)
    one, _ = a.redact("mail mo@quill.io and mo@quill.io again, or zed@quill.io")
    two, _ = b.redact("mo@quill.io")
    tags = re.findall(r"\[EMAIL:[0-9a-f]{8}\]", one)
    assert tags[0] == tags[1] == two and tags[2] != tags[0]
    other, _ = PIIRedactor(b"z" * 32).redact("mo@quill.io")
    assert other != two  # a different home's key gives different placeholders
    assert a.redact(one)[0] == one  # redacting twice changes nothing


def test_payloads_are_walked_and_counts_kept():
    redactor = PIIRedactor(SECRET)
    found: Counter[str] = Counter()
    payload = {"to": "lia@quill.io", "cards": [CARD, 42], "note": {"tel": "+1 415 555 0199"}}
    out = redact_value(payload, redactor, found)
    assert "lia@quill.io" not in str(out) and CARD not in str(out)
    assert out["cards"][1] == 42
    assert found == Counter({"EMAIL": 1, "CARD": 1, "PHONE": 1})
    assert redactor.counts == found


def test_custom_detector_plugs_in():
    badge = Detector("BADGE", re.compile(r"\bBDG-\d{5}\b"))
    chained = RedactorChain((PIIRedactor(SECRET), PIIRedactor(SECRET, detectors=(badge,))))
    out, found = chained.redact("badge BDG-44120 and ana@quill.io")
    assert "BDG-44120" not in out and found == Counter({"BADGE": 1, "EMAIL": 1})


def test_secret_file_is_private_and_kept(tmp_path: Path):
    path = tmp_path / "home" / "redaction.key"
    first = load_secret(path)
    assert len(first) == 32 and path.stat().st_mode & 0o077 == 0
    assert load_secret(path) == first


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_never_raises_and_is_idempotent(text):
    redactor = PIIRedactor(SECRET)
    once, _ = redactor.redact(text)
    assert redactor.redact(once)[0] == once


# ------------------------------------------------------------ wired into capture
def test_capture_redacts_before_any_file(tmp_path: Path):
    """Raw values reach no file under the home: db, WAL, spool, dead letters, vectors."""
    from beeweave_core.governance import default_redactor
    from beeweave_core.weave import Weave

    email, card = (
        "ines.quarrow@tidewell.example",
        f"{CARD[:4]} {CARD[4:8]} {CARD[8:12]} {CARD[12:]}",
    )
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    with Weave.open(url, spool_dir=tmp_path / "spool", redactor=default_redactor(tmp_path)) as w:
        w.emit("user_message", f"The customer's email is {email}; bill card {card}.",
               session_id="billing", payload={"contact": email})  # fmt: skip
        w.emit("tool_result", "ok", session_id="billing", ts=float("nan"),  # refused: bad ts
               payload={"card": card})  # fmt: skip
        w.emit("user_message", "ship to the usual depot", session_id="billing")
        w.flush()
        assert w.indexer is not None and w.indexer.sync(120)
        assert w.stats()["redacted"] == {"EMAIL": 2, "CARD": 2}  # one card in a dead letter
        hit = w.retrieve("the customer's email", session_id="billing", k=1)[0]
        assert "[EMAIL:" in hit.event.content and email not in hit.event.content
    raw = (email.encode(), CARD.encode(), CARD[:4].encode() + b" " + CARD[4:8].encode())
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(v in data for v in raw), path


def test_objects_a_checkpoint_holds_are_walked_and_keep_their_types():
    """Messages (pydantic), LangGraph's Send (slots) and Interrupt (dataclass), tuples,
    sets, errors: strings inside are redacted, types kept, untouched values not copied."""
    from collections import namedtuple
    from dataclasses import dataclass

    from langchain_core.messages import AIMessage
    from langgraph.types import Interrupt, Send

    @dataclass(frozen=True)
    class Note:
        text: str
        n: int = 1

    Pair = namedtuple("Pair", "who what")
    mail = "rosa.kettering@umber.example"
    value = {
        "msg": AIMessage(content=f"mail {mail}", tool_calls=[
            {"name": "send", "args": {"to": mail}, "id": "c1"}]),
        "send": Send("notify", {"to": mail}),
        "ask": Interrupt(value=f"confirm {mail}?", id="i1"),
        "note": Note(f"from {mail}"),
        "pair": Pair("me", mail),
        "tags": {mail, "plain"},
        "err": ValueError(f"bounced: {mail}"),
        "same": ("nothing", 1, 2.5),
    }  # fmt: skip
    found: Counter[str] = Counter()
    out = redact_value(value, PIIRedactor(SECRET), found)
    assert mail not in repr(out) and found == Counter({"EMAIL": 8})
    assert isinstance(out["msg"], AIMessage) and out["msg"].tool_calls[0]["args"]["to"].startswith(
        "[EMAIL:"
    )
    assert isinstance(out["send"], Send) and out["send"].node == "notify"
    assert isinstance(out["ask"], Interrupt) and isinstance(out["note"], Note)
    assert type(out["pair"]) is Pair and type(out["tags"]) is set and "plain" in out["tags"]
    assert isinstance(out["err"], ValueError) and "[EMAIL:" in str(out["err"])
    assert out["same"] is value["same"] and mail in value["msg"].content  # originals untouched
