from __future__ import annotations

import re
from pathlib import Path

import pytest

from revbench.settings import Settings, env_names, render_env_example

ROOT = Path(__file__).resolve().parents[2]


def test_env_example_lists_every_setting_and_nothing_else() -> None:
    listed = re.findall(r"^([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), flags=re.M)
    assert sorted(listed) == sorted(env_names())
    assert len(listed) == len(set(listed))


def test_env_example_is_what_the_generator_writes() -> None:
    # Descriptions and defaults drift too, not only names.
    assert (ROOT / ".env.example").read_text() == render_env_example()


def test_env_example_copied_to_env_gives_the_defaults(tmp_path: Path) -> None:
    # What a new user does first: every `KEY=` line with an empty default (a date, a path, a
    # secret) must mean unset, not fail to parse or become an empty key sent to a service.
    defaults = Settings().model_dump(mode="json")
    (tmp_path / ".env").write_text((ROOT / ".env.example").read_text())
    s = Settings()
    assert s.model_dump(mode="json") == defaults
    assert s.s2.api_key is None and s.refresh.until is None and s.http.ca_bundle is None
    assert s.schedule.ratings_cron == defaults["schedule"]["ratings_cron"]


def test_empty_means_unset_only_where_a_field_can_be_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVBENCH_S2__API_KEY", "")
    monkeypatch.setenv("REVBENCH_SCHEDULE__RATINGS_CRON", "")  # empty here means: not served
    s = Settings()
    assert s.s2.api_key is None
    assert s.schedule.ratings_cron == ""


def test_nested_env_and_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("REVBENCH_S2__BATCH_SIZE=123\nREVBENCH_ARXIV__CATEGORIES=[\"cs.IR\"]\n")
    monkeypatch.setenv("REVBENCH_GROBID__CONCURRENCY", "7")
    s = Settings()
    assert s.s2.batch_size == 123
    assert s.arxiv.categories == ["cs.IR"]
    assert s.grobid.concurrency == 7
    assert s.warehouse_path == Path(s.data_dir) / "warehouse.duckdb"


def test_secrets_never_print(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVBENCH_S2__API_KEY", "sk-very-secret")
    s = Settings()
    assert "sk-very-secret" not in repr(s) and "sk-very-secret" not in str(s.model_dump())
    assert s.s2.api_key is not None and s.s2.api_key.get_secret_value() == "sk-very-secret"


def test_data_lives_under_data_dir(tmp_path: Path) -> None:
    s = Settings()
    for p in (s.warehouse_path, s.cache_dir, s.worlds_dir, s.releases_dir):
        assert Path(s.data_dir) in p.parents


THROTTLE_DEFAULTS = {  # as each service had them before the fields were declared once (revbench.settings.Throttled)
    "arxiv": (60.0, 0.5, 900.0), "s2": (60.0, 0.25, 900.0), "openalex": (60.0, 0.05, 900.0)}
THROTTLE = ("throttle_max_delay_seconds", "throttle_recovery_seconds", "throttle_patience_seconds")


def test_one_throttle_section_keeps_each_services_defaults_and_names(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings()
    assert {svc: tuple(getattr(getattr(s, svc), f) for f in THROTTLE) for svc in THROTTLE_DEFAULTS} == THROTTLE_DEFAULTS
    # The declared defaults too (what .env.example and the docs print), each its own service's.
    declared = {svc: tuple(type(getattr(s, svc)).model_fields[f].default for f in THROTTLE) for svc in THROTTLE_DEFAULTS}
    assert declared == THROTTLE_DEFAULTS
    assert {f"REVBENCH_{svc.upper()}__{f.upper()}" for svc in THROTTLE_DEFAULTS for f in THROTTLE} <= set(env_names())
    # One service's variable moves that service only: a default is never shared state.
    monkeypatch.setenv("REVBENCH_S2__THROTTLE_RECOVERY_SECONDS", "2.5")
    s = Settings()
    assert (s.s2.throttle_recovery_seconds, s.arxiv.throttle_recovery_seconds, s.openalex.throttle_recovery_seconds) \
        == (2.5, 0.5, 0.05)


def test_a_throttle_default_that_is_no_throttle_setting_is_refused() -> None:
    from revbench.settings import Throttled

    with pytest.raises(TypeError, match="throttle_recovery is not a throttle setting"):
        type("Typo", (Throttled,), {"__module__": __name__}, throttle_recovery=0.1)
