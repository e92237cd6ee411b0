"""Survey links are unforgeable, expiring capabilities for one invitation."""

from __future__ import annotations

import base64
import time

import pytest
from pydantic import SecretStr

from revbench.errors import UsageError
from revbench.survey.tokens import BadToken, Claim, LinkSigner

KEY = SecretStr("k" * 32)
CLAIM = Claim("inv_" + "a" * 20, "rate", "2609.00001", 4)


def _signer(**kw: object) -> LinkSigner:
    return LinkSigner(KEY, **kw)  # type: ignore[arg-type]


def test_a_signed_claim_round_trips_and_names_no_person() -> None:
    token = _signer().sign(CLAIM)
    assert _signer().verify(token) == CLAIM
    payload = token.split(".")[0] if not token.startswith(".") else token.split(".")[1]
    assert "@" not in token and "ada" not in token.lower() and payload


def test_every_single_character_change_is_refused() -> None:
    token = _signer().sign(CLAIM)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
    refused = 0
    for i, ch in enumerate(token):
        forged = token[:i] + next(c for c in alphabet if c != ch) + token[i + 1:]
        with pytest.raises(BadToken):
            _signer().verify(forged)
        refused += 1
    assert refused == len(token)


@pytest.mark.parametrize("part", [-2, -1])  # the time stamp and the signature (both always end in unused bits)
def test_another_spelling_of_the_same_bytes_is_refused(part: int) -> None:
    """The last base64 character of each part has unused bits: a respelling decodes to the very
    same token, and would otherwise pass as a new link (a replay with a fresh digest)."""
    from itsdangerous.encoding import base64_decode

    token = _signer().sign(CLAIM)
    parts = token.split(".")
    part = len(parts) + part
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = parts[part][-1]
    respelled = parts[part][:-1] + alphabet[alphabet.index(last) + 1]
    assert base64_decode(respelled) == base64_decode(parts[part])  # the same bytes, spelled otherwise
    forged = ".".join(parts[:part] + [respelled] + parts[part + 1:])
    with pytest.raises(BadToken, match="not canonical"):
        _signer().verify(forged)


def _swap_payload(token: str, claim: Claim) -> str:
    """The signature of one token with the payload of another (each field tampered in turn)."""
    other = _signer().sign(claim)
    return other.rsplit(".", 2)[0] + "." + token.rsplit(".", 2)[1] + "." + token.rsplit(".", 2)[2]


@pytest.mark.parametrize("claim", [
    Claim("inv_" + "b" * 20, "rate", "2609.00001", 4),
    Claim(CLAIM.invitation, "rate", "2609.00002", 4),
    Claim(CLAIM.invitation, "rate", "2609.00001", 5),
    Claim(CLAIM.invitation, "optout"),
])
def test_a_tampered_field_is_refused(claim: Claim) -> None:
    with pytest.raises(BadToken):
        _signer().verify(_swap_payload(_signer().sign(CLAIM), claim))


def test_forged_tokens_are_refused() -> None:
    mine = LinkSigner(SecretStr("m" * 32)).sign(CLAIM)  # someone else's key
    hand_made = base64.urlsafe_b64encode(b'{"i":"inv_x","a":"rate","p":"x","r":5}').decode().rstrip("=") + ".abc.def"
    for token in (mine, hand_made, "", "not-a-token", "a.b.c.d"):
        with pytest.raises(BadToken):
            _signer().verify(token)


def test_a_link_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    import itsdangerous.timed

    old = time.time() - 31 * 86400
    monkeypatch.setattr(itsdangerous.timed.time, "time", lambda: old)
    stale = _signer().sign(CLAIM)
    monkeypatch.undo()
    with pytest.raises(BadToken, match="expired"):
        _signer(max_age_days=30).verify(stale)
    assert _signer(max_age_days=60).verify(stale) == CLAIM


def test_an_optout_link_never_expires_rating_and_page_links_do(monkeypatch: pytest.MonkeyPatch) -> None:
    import itsdangerous.timed

    old = time.time() - 10 * 365 * 86400
    monkeypatch.setattr(itsdangerous.timed.time, "time", lambda: old)
    optout, rating, page = (_signer().sign(c) for c in (Claim(CLAIM.invitation, "optout"), CLAIM, Claim(CLAIM.invitation, "page")))
    monkeypatch.undo()
    assert _signer(max_age_days=30).verify(optout) == Claim(CLAIM.invitation, "optout")
    for stale in (rating, page):
        with pytest.raises(BadToken, match="expired"):
            _signer(max_age_days=30).verify(stale)
    with pytest.raises(BadToken, match="bad signature"):  # an old forged opt-out is still forged
        LinkSigner(SecretStr("m" * 32)).verify(optout)


def test_a_link_from_the_future_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import itsdangerous.timed

    later = time.time() + 3600
    monkeypatch.setattr(itsdangerous.timed.time, "time", lambda: later)
    ahead = _signer().sign(CLAIM)
    monkeypatch.undo()
    with pytest.raises(BadToken, match="expired"):
        _signer().verify(ahead)


def test_keys_rotate_old_verifies_new_signs() -> None:
    new = SecretStr("n" * 32)
    before = _signer().sign(CLAIM)
    rotated = LinkSigner(new, [KEY])
    assert rotated.verify(before) == CLAIM
    after = rotated.sign(CLAIM)
    assert LinkSigner(new).verify(after) == CLAIM
    with pytest.raises(BadToken):
        _signer().verify(after)  # the old key alone does not accept the new key's links
    with pytest.raises(BadToken):
        LinkSigner(new).verify(before)  # a retired key's links die with it


def test_no_key_no_links() -> None:
    with pytest.raises(UsageError, match="REVBENCH_SURVEY__SIGNING_KEY"):
        LinkSigner(None)
    with pytest.raises(UsageError):
        LinkSigner(SecretStr("short"))


def test_the_signer_of_the_survey_settings_takes_every_one_of_them() -> None:
    from revbench.settings import Settings

    sv = Settings().with_overrides(survey={"signing_key": "n" * 32, "old_signing_keys": [KEY.get_secret_value()],
                                           "link_max_age_days": 7}).survey
    signer = LinkSigner.from_settings(sv)
    assert signer.verify(_signer().sign(CLAIM)) == CLAIM  # the earlier key still verifies
    assert LinkSigner(SecretStr("n" * 32)).verify(signer.sign(CLAIM)) == CLAIM  # the signing key signs
    assert signer.max_age == 7 * 86400
    with pytest.raises(UsageError, match="REVBENCH_SURVEY__SIGNING_KEY"):
        LinkSigner.from_settings(Settings().survey)
