"""The curator's seat in a real browser: a `prefect server start` with its UI, a ratings run
paused on its flags, and Debian's chromium opening the run's page, its Resume form (the
evidence names each paper by title, linked to arXiv) and the flags artifact.

``--screenshots DIR`` saves what the curator sees (the docs' ratings page shows them)."""

from __future__ import annotations

import contextvars
import re
import sys
import threading
from collections.abc import Iterator

import pytest

from revbench.flows.ratings import ratings_flow
from revbench.replay.server import free_port
from tests.support.browser import chromium
from tests.support.processes import clean_env, prefect_server_process
from tests.support.survey import paused_run_id
from tests.support.waiting import form_of

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prefect_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prefect server with its UI (the session's test server serves the API only); its UI is
    told where the API is, as a curator's set-up on another port must (PREFECT_UI_API_URL)."""
    home = tmp_path_factory.mktemp("prefect-ui")
    port = free_port()
    env = clean_env(home, PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{home / 'prefect.db'}",
                    PREFECT_SERVER_UI_ENABLED="true", PREFECT_UI_API_URL=f"http://127.0.0.1:{port}/api")
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with prefect_server_process(command, env, home, port) as api:
        yield api


def _flags_artifact(run_id: object) -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        [found] = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["ratings-flags"]), flow_run_id=ArtifactFilterFlowRunId(any_=[run_id])))
    return str(found.id)


def test_a_curator_sees_each_flagged_paper_by_title_in_the_prefect_ui(prefect_ui: str, answered,
                                                                    request: pytest.FixtureRequest) -> None:
    from prefect.flow_runs import resume_flow_run
    from prefect.settings import PREFECT_API_URL, temporary_settings

    shots = request.config.getoption("--screenshots")
    shots = request.config.invocation_params.dir / shots if shots else None
    s, _who = answered
    result: dict[str, object] = {}
    ui = prefect_ui.removesuffix("/api")
    with temporary_settings(updates={PREFECT_API_URL: prefect_ui}):
        ctx = contextvars.copy_context()  # the run's thread talks to this server too
        runner = threading.Thread(target=lambda: ctx.run(lambda: result.update(out=ratings_flow(s))))
        runner.start()
        run_id = None
        try:
            run_id = paused_run_id(runner, result)
            description, _schema = form_of(run_id)
            titles = re.findall(r"“([^”]+)”", description)
            assert titles, description[:2000]
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1300, "height": 1300})
                page.goto(f"{ui}/runs/flow-run/{run_id}")
                page.get_by_role("button", name="Resume").first.click()
                form = page.get_by_role("dialog")
                form.get_by_text("This run waits for", exact=False).first.wait_for(timeout=60_000)
                # The evidence the curator decides on: a flagged paper's title, a link to its page.
                form.get_by_text(titles[0], exact=False).first.wait_for(timeout=30_000)
                links = [a.get_attribute("href") for a in form.locator("a[href*='arxiv.org/abs/']").all()]
                assert links, "the form links no paper"
                if shots:
                    page.screenshot(path=str(shots / "ratings-decisions.png"))
                page.get_by_role("button", name="Close").first.click()
                page.goto(f"{ui}/artifacts/artifact/{_flags_artifact(run_id)}")  # rendered, as the run lists it
                page.get_by_text(titles[0], exact=False).first.wait_for(timeout=30_000)
                assert page.locator("a[href*='arxiv.org/abs/']").count() >= 1
                if shots:  # the flags narrowed to the UI's page at the width the docs promise (1,280 pixels)
                    page.set_viewport_size({"width": 1280, "height": 900})
                    page.screenshot(path=str(shots / "ratings-flags-artifact.png"))
        finally:
            if runner.is_alive() and run_id is not None:
                resume_flow_run(run_id, run_input={"curator": "curator ada", "all_flags": "keep all"})
                runner.join(timeout=120)
    assert not runner.is_alive() and "out" in result, result
