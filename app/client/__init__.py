"""A Python client for the context store: every route, sync or async, typed.

    from app.client import ContextStoreClient
    with ContextStoreClient("http://127.0.0.1:8000", api_key) as store:
        receipt = store.import_save("demo", open("mdan-save-1705314225.json", "rb").read())
        file = store.latest_save("demo")        # Document: content, etag, filename

``AsyncContextStoreClient`` has the same methods, awaited. Anything but a success raises
``ContextStoreError`` with the problem's status, type, title, detail and errors.
"""

from app.client.calls import Document
from app.client.client import AsyncContextStoreClient, ContextStoreClient
from app.client.errors import ContextStoreError

__all__ = ["AsyncContextStoreClient", "ContextStoreClient", "ContextStoreError", "Document"]
