"""What the survey server may hold: it faces the internet for weeks, so a flaw in it must not hand
over the keys of everything else. It needs its signing keys, its store and its pages' settings;
every other secret (the SMTP login, the Semantic Scholar and LLM keys, the release id key, the
backup key, the Prefect API's credentials) belongs to the flows and the curator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, SecretStr

from revbench.settings import Settings

OWN_SECRETS = frozenset({"survey.signing_key", "survey.old_signing_keys"})
"""The secret settings the survey server needs: the keys its links are signed and verified with."""

PREFECT_SECRETS = ("PREFECT_API_AUTH_STRING", "PREFECT_SERVER_API_AUTH_STRING", "PREFECT_API_KEY")
"""Credentials of the curator's plane (Prefect reads them from the environment itself)."""


def secret_settings(model: type[BaseModel] = Settings, prefix: str = "") -> list[str]:
    """The dotted names of every secret setting (a key, a password, a list of keys)."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += secret_settings(ann, f"{prefix}{name}.")
        elif _holds_secret(ann):
            out.append(f"{prefix}{name}")
    return out


def _holds_secret(ann: Any) -> bool:
    if ann is SecretStr:
        return True
    return any(_holds_secret(arg) for arg in getattr(ann, "__args__", ()))


def variable(dotted: str) -> str:
    """The environment variable of a dotted setting (``smtp.password``: REVBENCH_SMTP__PASSWORD)."""
    return "REVBENCH_" + "__".join(part.upper() for part in dotted.split("."))


def foreign_secrets(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    """The variables of the secrets ``settings`` and ``environ`` (the process's environment, read
    by the entry point) hold that the survey server must not: every secret setting but its
    signing keys, and the Prefect API's credentials."""
    held = [variable(dotted) for dotted in secret_settings() if dotted not in OWN_SECRETS
            and _is_set(settings, dotted)]
    return held + [name for name in PREFECT_SECRETS if environ.get(name, "").strip()]


def without_foreign_secrets(settings: Settings) -> Settings:
    """``settings`` with every secret but the signing keys dropped (a demo's data folder hands its
    own release key to every command run on it; the survey server has no use for it)."""
    changes: dict[str, Any] = {}
    for dotted in secret_settings():
        if dotted not in OWN_SECRETS and _is_set(settings, dotted):
            empty = [] if isinstance(_value(settings, dotted), list) else None
            section, _, field = dotted.partition(".")
            if field:
                changes.setdefault(section, {})[field] = empty
            else:
                changes[section] = empty
    return settings.with_overrides(**changes) if changes else settings


def _value(settings: Settings, dotted: str) -> Any:
    value: Any = settings
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _is_set(settings: Settings, dotted: str) -> bool:
    value = _value(settings, dotted)
    if isinstance(value, SecretStr):
        return bool(value.get_secret_value())
    return bool(value)

