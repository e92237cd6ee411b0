"""``revbench doctor``'s settings probe: secrets set where a configured stage needs them, none
empty or a template's placeholder, and no example host (RFC 2606) where mail or links go.

:func:`plain_values` is also what the doctor scrubs its answers by (passwords in URLs).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from revbench.health import Probe, ProbeContext, is_loopback

if TYPE_CHECKING:
    from revbench.settings import Settings

PLACEHOLDER = re.compile(r"change[-_ ]?me|replace[-_ ]?me|^your[-_ ]|^x{3,}$|^<[^>]*>$", re.I)
"""What the templates write where a user must put their own value (`change-me`, `xxx`, `<key>`)."""
PLACEHOLDER_SECRET = re.compile(r"^(todo|secret|password|changeit|key|token)$", re.I)
"""Words a secret is set to while nobody has chosen one."""
PLACEHOLDER_HOST = re.compile(r"(^|\.)(example\.(com|org|net)|example|invalid)$", re.I)
"""Hosts reserved for examples (RFC 2606): nothing real answers there."""


def probe_settings(ctx: ProbeContext) -> Probe:
    """Secrets set where a configured stage needs them, none empty or a template's placeholder, and
    no example host (RFC 2606) where mail or links go."""
    settings = ctx.settings
    problems, notes = _settings_problems(settings)
    if problems:
        return Probe("settings", "environment and .env", "fail", "; ".join(problems + notes),
                     fix="set them in .env or the environment (`revbench env-example` lists every setting)")
    if notes:
        return Probe("settings", "environment and .env", "warn", "; ".join(notes))
    stages = ", ".join(settings.refresh.stages)
    return Probe("settings", "environment and .env", "ok", f"what the stages need is set (stages: {stages})")


def _settings_problems(settings: Settings) -> tuple[list[str], list[str]]:
    """(what would make a configured stage fail, what is worth a warning)."""
    stages = set(settings.refresh.stages)
    problems: list[str] = []
    notes: list[str] = []
    sv, sm = settings.survey, settings.smtp

    def secret(var: str, value: Any, needed_by: str = "", min_len: int = 0) -> None:
        if value is None:
            if needed_by:
                problems.append(f"{var} is not set ({needed_by})")
            return
        text = value.get_secret_value()  # never empty: the settings read `KEY=` as unset
        if PLACEHOLDER.search(text.strip()) or PLACEHOLDER_SECRET.search(text.strip()):
            problems.append(f"{var} holds a template's placeholder, not a real value")
        elif min_len and len(text) < min_len:
            problems.append(f"{var} is shorter than {min_len} characters")

    secret("REVBENCH_SURVEY__SIGNING_KEY", sv.signing_key, "the survey signs its links with it" if "survey" in stages else "", 16)
    for old in sv.old_signing_keys:
        secret("REVBENCH_SURVEY__OLD_SIGNING_KEYS", old)
    secret("REVBENCH_RELEASE__ID_KEY", settings.release.id_key,
           "the release derives its ids with it" if "release" in stages else "", 16)
    secret("REVBENCH_SMTP__PASSWORD", sm.password, "REVBENCH_SMTP__USERNAME is set, so the survey logs in" if sm.username else "")
    secret("REVBENCH_S2__API_KEY", settings.s2.api_key)
    secret("REVBENCH_LLM__API_KEY", settings.llm.api_key)
    if "survey" in stages and not sm.host:
        problems.append("REVBENCH_SMTP__HOST is not set (the survey sends through it)")
    # The demo sends from an example address to its own local sink: a warning there, a failure
    # where real mail goes out.
    local_mail = not sm.host or is_loopback(sm.host)
    mail_fields = {"REVBENCH_SURVEY__SENDER_EMAIL", "REVBENCH_SURVEY__REPLY_TO"}
    for var, text in plain_values(settings):
        if var in mail_fields and "survey" not in stages:
            continue
        if PLACEHOLDER.search(text):
            problems.append(f"{var} holds a template's placeholder")
            continue
        host = next((h for h in _hosts(text) if PLACEHOLDER_HOST.search(h)), None)
        if host is None:
            continue
        if var in mail_fields and local_mail:
            notes.append(f"{var}={text} is an example address: real mail servers refuse or junk mail from it")
        else:
            problems.append(f"{var} names the example host {host}: nothing real answers there")
    return problems, notes


def plain_values(settings: Settings) -> list[tuple[str, str]]:
    """Every text setting (secrets aside) by its variable name: lists item by item."""
    out: list[tuple[str, str]] = []
    for section, fields in settings.model_dump().items():
        if section == "replay" or not isinstance(fields, dict):
            continue
        for name, value in fields.items():
            for one in value if isinstance(value, list) else [value]:
                if isinstance(one, str) and one.strip():
                    out.append((f"REVBENCH_{section.upper()}__{name.upper()}", one.strip()))
    return out


def _hosts(text: str) -> list[str]:
    """The hosts a setting's text names: of URLs (``scheme://host``), of addresses (``x@host``), or itself."""
    found = re.findall(r"://(?:[^/@\s]*@)?([A-Za-z0-9.-]+)", text) + re.findall(r"@([A-Za-z0-9.-]+\.[A-Za-z]+)", text)
    if not found and re.fullmatch(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+", text):
        found = [text]
    return found
