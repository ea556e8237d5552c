"""With authentication off, a request that sends an API key is not answered in silence.

CONTEXT_STORE_AUTH=off makes every request tenant ``default`` with every scope, whatever key
it carries. Someone who sends a key believes it is checked: the response says it was not (a
``Warning`` header, code 299 as Kubernetes uses it for API warnings), and the server logs it
once. The key itself is never logged.
"""

import logging

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.deps import presented_key

log = logging.getLogger(__name__)

IGNORED_KEY_WARNING = (
    '299 - "Authentication is off (CONTEXT_STORE_AUTH=off): the API key sent was ignored and '
    'the request acts as tenant default with every scope."'
)


class IgnoredKeyWarningMiddleware:
    """Installed only when authentication is off."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.logged = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or presented_key(Headers(scope=scope)) is None:
            await self.app(scope, receive, send)
            return
        if not self.logged:
            self.logged = True
            log.warning(
                "A request sent an API key, but CONTEXT_STORE_AUTH=off: keys are ignored and "
                "every request acts as tenant 'default'. Logged once; every such response "
                "carries a Warning header."
            )

        async def send_with_warning(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append("Warning", IGNORED_KEY_WARNING)
            await send(message)

        await self.app(scope, receive, send_with_warning)
