from datetime import datetime

from sqlalchemy import delete
from sqlmodel import Session, col, select

from app.idempotency.models import IdempotencyRecord


class IdempotencyRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get_live(self, tenant: str, key: str, now: datetime) -> IdempotencyRecord | None:
        statement = select(IdempotencyRecord).where(
            IdempotencyRecord.tenant == tenant,
            IdempotencyRecord.key == key,
            col(IdempotencyRecord.expires_at) > now,
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
