"""Signed survey links: unforgeable, expiring capabilities for one invitation.

A token carries an opaque invitation id (never an email or a name), an action (the page, one
rating of one paper, opting out, or ``probe``: ``revbench doctor``'s test link, which opens nothing)
and, for a rating, the paper and the level. It is signed
with HMAC-SHA256 (``itsdangerous``) under the survey signing key and a fixed salt, and carries
its signing time, so rating and page links expire (an opt-out link never does). Keys rotate: old
keys still verify, the newest signs.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from itsdangerous import BadData, BadSignature, URLSafeTimedSerializer
from itsdangerous.encoding import base64_decode, base64_encode
from pydantic import SecretStr

from revbench.errors import UsageError

if TYPE_CHECKING:
    from revbench.settings import SurveySettings

SALT = "revbench-survey-link-v1"
Action = Literal["page", "rate", "optout", "probe"]
ACTIONS: tuple[Action, ...] = ("page", "rate", "optout", "probe")
RATINGS = (1, 2, 3, 4, 5)
PROBE_INVITATION = "doctor"
"""The invitation a probe link names: none (no route but the probe's accepts a probe link)."""
PROBE_MAX_SKEW_SECONDS = 600
"""A probe link is checked the moment it is signed: older or newer than this means the two
machines' clocks differ that much (and their rating links would expire early or late)."""


class BadToken(Exception):
    """A token that must record nothing: forged, tampered, expired or malformed."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Claim:
    """What a valid token allows."""

    invitation: str
    action: Action
    paper: str | None = None
    rating: int | None = None


class LinkSigner:
    """Signs and verifies survey links."""

    def __init__(self, key: SecretStr | None, old_keys: list[SecretStr] | None = None, max_age_days: int = 30):
        if key is None or len(key.get_secret_value()) < 16:
            raise UsageError("REVBENCH_SURVEY__SIGNING_KEY is not set or shorter than 16 characters: survey links "
                             "cannot be signed (use a long random value, e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)")
        # itsdangerous signs with the last key and verifies with all of them.
        keys = [k.get_secret_value() for k in old_keys or []] + [key.get_secret_value()]
        self._serializer = URLSafeTimedSerializer(keys, salt=SALT, signer_kwargs={"digest_method": hashlib.sha256})
        self.max_age = max_age_days * 86400

    @classmethod
    def from_settings(cls, survey: SurveySettings) -> LinkSigner:
        """The signer the survey settings name: the signing key, the earlier keys still
        accepted, and how long a rating or page link stays valid."""
        return cls(survey.signing_key, survey.old_signing_keys, survey.link_max_age_days)

    def sign(self, claim: Claim) -> str:
        payload: dict[str, object] = {"i": claim.invitation, "a": claim.action}
        if claim.paper is not None:
            payload["p"] = claim.paper
        if claim.rating is not None:
            payload["r"] = claim.rating
        return str(self._serializer.dumps(payload))

    def verify(self, token: str) -> Claim:
        """The claim of a valid token; ``BadToken`` for anything else."""
        if not _canonical(token):
            raise BadToken("not canonical")
        # The signature first, with no age: whether the link expires depends on what it claims.
        try:
            data, signed_at = self._serializer.loads(token, return_timestamp=True)
        except BadSignature:
            raise BadToken("bad signature") from None
        if not isinstance(data, dict) or not isinstance(data.get("i"), str) or data.get("a") not in ACTIONS:
            raise BadToken("malformed")
        # An opt-out link never expires: a late "stop emailing me" must still be heard (and it
        # can only ever stop mail). Rating and page links expire, as itsdangerous would check them.
        age = int(time.time()) - int(signed_at.timestamp())
        if data["a"] == "probe" and abs(age) > PROBE_MAX_SKEW_SECONDS:
            raise BadToken("expired")
        if data["a"] not in ("optout", "probe") and not 0 <= age <= self.max_age:
            raise BadToken("expired")
        paper, rating = data.get("p"), data.get("r")
        if data["a"] == "rate" and (not isinstance(paper, str) or rating not in RATINGS or isinstance(rating, bool)):
            raise BadToken("malformed rating")
        return Claim(data["i"], data["a"], paper if isinstance(paper, str) else None, rating if data["a"] == "rate" else None)

    def probe_token(self) -> str:
        """A link token for ``GET /healthz/link/{token}``: it proves the server verifies what
        this key signs, and nothing else accepts it."""
        return self.sign(Claim(PROBE_INVITATION, "probe"))


def _canonical(token: str) -> bool:
    """Whether each base64 part is written the one way it encodes to. The last character of a
    part carries unused bits, so up to four spellings decode to one token; without this check
    each would verify with its own digest, and a replayed click could record again."""
    parts = token.split(".")
    if parts and parts[0] == "":  # a compressed payload is marked by a leading dot
        parts = parts[1:]
    try:
        return all(p and base64_encode(base64_decode(p)).decode() == p for p in parts)
    except (BadData, ValueError, UnicodeError):
        return False


def token_digest(token: str) -> str:
    """A short, non-reversible name for a token (replays are recognised by it; tokens are never stored)."""
    return hashlib.sha256(token.encode()).hexdigest()[:32]
