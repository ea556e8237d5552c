from datetime import datetime

from sqlalchemy import Connection, bindparam, literal
from sqlmodel import Session, col, select

from app.core.db import DriverStatement
from app.core.pagination import SortKey, paginate
from app.keys.models import ApiKey

KEY_ORDER = [SortKey(ApiKey.created_at), SortKey(ApiKey.id)]

# Built once, run on the driver: it runs in every request whose key the server remembered.
_ACTIVE_KEY = DriverStatement(
    select(literal(1)).where(
        col(ApiKey.id) == bindparam("key_id"), col(ApiKey.revoked_at).is_(None)
    )
)


def is_active(connection: Connection, key_id: str) -> bool:
    """On a connection rather than a session: called while a session begins its transaction."""
    return _ACTIVE_KEY.first(connection, {"key_id": key_id}) is not None


class ApiKeyRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, key: ApiKey) -> ApiKey:
        self.session.add(key)
        self.session.flush()
        return key

    def get_active_by_hash(self, key_hash: str) -> ApiKey | None:
        statement = select(ApiKey).where(
            ApiKey.key_hash == key_hash, col(ApiKey.revoked_at).is_(None)
        )
        return self.session.exec(statement).first()

    def get(self, tenant: str | None, key_id: str) -> ApiKey | None:
        statement = select(ApiKey).where(ApiKey.id == key_id)
        if tenant is not None:
            statement = statement.where(ApiKey.tenant == tenant)
        return self.session.exec(statement).first()

    def page(
        self, tenant: str | None, cursor: str | None, limit: int
    ) -> tuple[list[ApiKey], str | None]:
        statement = select(ApiKey)
        if tenant is not None:
            statement = statement.where(ApiKey.tenant == tenant)
        return paginate(self.session, statement, KEY_ORDER, cursor, limit, scope=(tenant,))

    def revoke(self, key: ApiKey, at: datetime) -> None:
        key.revoked_at = at
        self.session.add(key)
        self.session.flush()
