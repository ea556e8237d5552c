from datetime import datetime

from sqlmodel import Session, col, select

from app.core.pagination import SortKey, paginate
from app.keys.models import ApiKey

KEY_ORDER = [SortKey(ApiKey.created_at), SortKey(ApiKey.id)]  # type: ignore[arg-type]


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
        return paginate(self.session, statement, KEY_ORDER, cursor, limit)

    def revoke(self, key: ApiKey, at: datetime) -> None:
        key.revoked_at = at
        self.session.add(key)
        self.session.flush()
