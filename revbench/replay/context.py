"""What a service module of the replay server reads of the server answering a request: its
:class:`ReplayContext`, from ``request.app.state.replay`` (:func:`replay_of`).

The server (``revbench.replay.server``) includes the service modules' routes, so they cannot
import it back, not even for annotations: they name this Protocol, which imports neither, and the
server's :class:`~revbench.replay.server.ReplayApp` satisfies it (checked where it stores itself
on its app's state, and by ``tests/test_structure_routes.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from revbench.replay.faults import FaultInjector
    from revbench.replay.world_store import WorldStore
    from revbench.settings import ReplaySettings

T = TypeVar("T")


@runtime_checkable
class ReplayContext(Protocol):
    """The replay server as its service modules see it: its settings, world and fault schedule,
    what ``revbench doctor`` reads of it, and how it answers."""

    @property
    def settings(self) -> ReplaySettings:
        """The server's settings (arXiv's quirk rate and the fault seed among them)."""

    @property
    def world(self) -> WorldStore | None:
        """The world it answers from, or None when it runs on fixtures alone."""

    @property
    def faults(self) -> FaultInjector:
        """Its fault schedule (arXiv counts the quirks it serves in ``injected``)."""

    @property
    def grobid_version(self) -> str:
        """The GROBID release it says it is."""

    @property
    def llm_models(self) -> tuple[str, ...]:
        """The models its LLM endpoint lists."""

    async def respond(self, service: str, key: str, status: int, body: bytes, content_type: str,
                      headers: dict[str, str] | None = None) -> Response:
        """Answer, unless the fault schedule says this attempt fails."""

    def wrong_key(self, service: str, request: Request) -> bool:
        """Whether ``request`` carries a key other than the one the server holds for ``service``."""

    def need_world(self) -> WorldStore:
        """The world, or a LookupError when the server runs on fixtures alone."""

    def service_state(self, name: str, make: Callable[[], T]) -> T:
        """What a service's routes remember between requests, made by ``make`` on first use."""


def replay_of(request: Request) -> ReplayContext:
    """The replay server answering ``request`` (kept on its app's state)."""
    replay: ReplayContext = request.app.state.replay
    return replay
