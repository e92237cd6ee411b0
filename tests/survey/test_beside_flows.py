"""The survey server and refresh flows at the same time: the server never opens the warehouse,
so a flow writing it and people answering never wait on each other's locks."""

from __future__ import annotations

import re
import threading
import time
from datetime import date

import httpx
import pytest

from revbench.flows.ingest import ingest_flow
from revbench.flows.pools import pools_flow
from revbench.flows.survey import survey_flow
from revbench.replay.mailsink import MailSink
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from revbench.warehouse.store import SurveyStore
from tests.support.common import on_replay
from tests.support.survey import survey_server_process

pytestmark = pytest.mark.slow
RATE = re.compile(r"http://127\.0\.0\.1:9(/r/[A-Za-z0-9_.\-]+)")


def test_a_refresh_writes_the_warehouse_while_the_server_takes_answers(
        survey_settings: Settings, sink: MailSink, replay, small_world) -> None:
    survey_flow.fn(survey_settings, round=1, approve="all", approver="tester")
    # Each person's five circles for their first paper, clicked in turn, so that every pass
    # changes a rating and writes the store.
    circles = [RATE.findall(m.get_body(("plain",)).get_content())[:5] for m in sink.messages]  # type: ignore[union-attr]
    assert len(circles) > 3 and all(len(c) == 5 for c in circles)
    app = replay(world=small_world)
    refresh = on_replay(survey_settings, app)
    codes: list[int] = []
    clicked: set[str] = set()
    during: list[int] = []
    errors: list[BaseException] = []
    first_answer, flows_started, flows_done = threading.Event(), threading.Event(), threading.Event()

    with survey_server_process(survey_settings) as (base, proc):
        def people() -> None:
            try:
                with httpx.Client(base_url=base, timeout=30) as client:
                    for turn in range(100):
                        if flows_done.is_set() and turn >= 5:
                            break
                        for person in circles:
                            started = flows_started.is_set()
                            codes.append(client.post(person[turn % 5]).status_code)  # Confirm on a rating link
                            clicked.add(person[turn % 5])
                            first_answer.set()
                            if started and not flows_done.is_set():
                                during.append(1)
                            time.sleep(0.01)
            except BaseException as e:  # noqa: BLE001 (reported by the main thread)
                errors.append(e)

        answering = threading.Thread(target=people)
        answering.start()
        assert first_answer.wait(60)
        flows_started.set()
        ingest = ingest_flow.fn(refresh, date(2026, 9, 1), date(2026, 9, 20))
        pools = pools_flow.fn(refresh, round=2)
        flows_done.set()
        answering.join(120)
        alive = proc.poll() is None
    assert not errors and alive
    assert set(codes) == {303} and during  # answers were taken while the flows wrote
    assert ingest.run_id and pools.round == 2
    events = SurveyStore(survey_settings.survey_store_path).events_since()
    assert len(events) == len(clicked) and all(e["source"] == "click" for e in events)
    with Warehouse.open(survey_settings.warehouse_path, read_only=True) as wh:
        assert wh.survey.survey_messages().height == len(sink.messages)
