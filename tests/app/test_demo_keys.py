"""The demo's own keys: a fresh folder's release id key is derived from the world, so two fresh
demos print the same release ids and intervals (the bootstrap resamples in id order); the link
signing key stays drawn; a folder keeps the key it has."""

from __future__ import annotations

from pathlib import Path

from revbench.app.demo import demo_key
from revbench.settings import Settings


def test_a_fresh_folders_release_key_is_the_worlds_and_a_kept_key_stays(tmp_path: Path) -> None:
    a, b = Settings(data_dir=tmp_path / "a"), Settings(data_dir=tmp_path / "b")
    for s in (a, b):
        s.data_dir.mkdir()
    assert demo_key(a, "release", derived_from="world-1") == demo_key(b, "release", derived_from="world-1")
    other = Settings(data_dir=tmp_path / "c")
    other.data_dir.mkdir()
    assert demo_key(other, "release", derived_from="world-2") != demo_key(a, "release", derived_from="world-1")
    # An older folder's drawn key is kept: its releases keep their ids.
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".release-demo-key").write_text("an-older-drawn-key-of-this-folder")
    assert demo_key(Settings(data_dir=tmp_path / "d"), "release", derived_from="world-1") == "an-older-drawn-key-of-this-folder"
    assert demo_key(a, "survey") != demo_key(b, "survey")  # the link signing key is drawn
