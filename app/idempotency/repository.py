from datetime import datetime
from typing import NamedTuple

from sqlalchemy import delete, func
from sqlalchemy import select as select_rows
from sqlmodel import Session, col, select

from app.idempotency.models import IdempotencyRecord


class Claimed(NamedTuple):
    """What a claim needs of a key's row to decide: never the stored body, which may be large
    and is read after the write turn (``body``)."""

    request_hash: str
    status_code: int | None
    headers: dict[str, str] | None
    body_form: str | None
    body_bytes: int | None


class IdempotencyRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get_live(self, tenant: str, key: str, now: datetime) -> Claimed | None:
        # length() reads a value's size, not its bytes: SQLite from the record's header,
        # PostgreSQL from the TOAST pointer (byteaoctetlen).
        # SQLAlchemy's select: SQLModel's is typed for at most four columns.
        statement = select_rows(
            col(IdempotencyRecord.request_hash),
            col(IdempotencyRecord.status_code),
            col(IdempotencyRecord.headers),
            col(IdempotencyRecord.body_form),
            func.length(col(IdempotencyRecord.body)),
        ).where(
            col(IdempotencyRecord.tenant) == tenant,
            col(IdempotencyRecord.key) == key,
            col(IdempotencyRecord.expires_at) > now,
        )
        row = self.session.execute(statement).first()
        return None if row is None else Claimed(*row)

    def body(self, tenant: str, key: str, request_hash: str) -> bytes | None:
        """The stored body of the key's answer to the request ``request_hash`` names; None
        when the key is no longer that request's (expired and claimed again meanwhile)."""
        statement = select(IdempotencyRecord.body).where(
            col(IdempotencyRecord.tenant) == tenant,
            col(IdempotencyRecord.key) == key,
            IdempotencyRecord.request_hash == request_hash,
            col(IdempotencyRecord.status_code).is_not(None),
        )
        return self.session.exec(statement).first()

    def delete_expired(self, tenant: str, now: datetime) -> None:
        self.session.execute(
            delete(IdempotencyRecord).where(
                col(IdempotencyRecord.tenant) == tenant,
                col(IdempotencyRecord.expires_at) <= now,
            )
        )

    def claim(self, record: IdempotencyRecord) -> None:
        """Insert the key's row; raises IntegrityError when another request holds the key."""
        with self.session.begin_nested():
            self.session.add(record)
        self.session.flush()

    def save(self, record: IdempotencyRecord) -> None:
        self.session.add(record)
        self.session.flush()
