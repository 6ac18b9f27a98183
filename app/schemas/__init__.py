"""Request and response bodies of the HTTP API (pydantic v2), one module per route group.

Both `app.api` (routes) and `app.services` import these modules, and they import neither:
services take request bodies and return domain objects (the indexer's dataclasses), and the
response bodies build themselves from those (`from_...`) at the edge.
"""
