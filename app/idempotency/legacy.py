"""TEMPORARY bridge for the routers not yet moved to ``app.storage.route`` (issue 18): the old
replay()/record(response) pair on the request's write session. Deleted when the last router
moves."""

from typing import Annotated

from fastapi import Depends, Response
from sqlmodel import Session

from app.core.deps import WriteSession
from app.idempotency.service import Idempotency, IdempotencyDep


class SessionIdempotency:
    def __init__(self, session: Session, idempotency: Idempotency | None) -> None:
        self.session = session
        self.idempotency = idempotency

    def replay(self) -> Response | None:
        return None if self.idempotency is None else self.idempotency.claim(self.session)

    def record(self, response: Response) -> Response:
        if self.idempotency is None:
            return response
        return self.idempotency.record(self.session, response)


async def _legacy(session: WriteSession, idempotency: IdempotencyDep) -> SessionIdempotency:
    return SessionIdempotency(session, idempotency)


LegacyIdempotencyDep = Annotated[SessionIdempotency, Depends(_legacy, scope="function")]
