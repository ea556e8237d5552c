"""The store over the Model Context Protocol: the same routes as tools, resources and a prompt.

Every tool and resource is one call of the Python client (``app.client``), which describes
each REST route once. Over Streamable HTTP (``/mcp``) the client sends that call to this very
app in process, with the caller's key; over stdio (``context-store mcp``) it sends it to a
server's URL. Either way a tool gets exactly what the REST route answers: its auth, scopes,
tenants, rules, idempotency and errors.
"""
