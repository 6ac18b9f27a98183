"""Request bodies bounded in bytes before they are read whole.

An ASGI middleware, under every route: a body whose declared `Content-Length` is over its limit
is answered 413 at once, unread; one sent without a length (chunked) or lying about it is
counted as it arrives, and the route reading it gets `BodyTooLargeError` (413) as soon as it
passes the limit. Either way the server holds at most the limit's bytes of it. JSON bodies may
have `DOCSIM_API__MAX_BODY_BYTES`; uploads (`multipart/form-data`) the files' limit
(`DOCSIM_FILES__MAX_BYTES`) plus `FORM_FIELD_BYTES` for their form fields.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from docsim.app.core.errors import BodyTooLargeError
from docsim.app.core.settings import ServiceSettings

FORM = "multipart/form-data"
FORM_FIELD_BYTES = 1 << 20  # room for an upload's form fields beside its files
_CLOSE = (b"connection", b"close")


def body_limit(settings: ServiceSettings, content_type: str) -> tuple[int, str]:
    """The byte limit of a body of `content_type`, and the setting that sets it."""
    if content_type.lower().startswith(FORM):
        return settings.files.max_bytes + FORM_FIELD_BYTES, "DOCSIM_FILES__MAX_BYTES (+1 MiB)"
    return settings.api.max_body_bytes, "DOCSIM_API__MAX_BODY_BYTES"


def _message(size: str, limit: int, setting: str) -> str:
    return f"the request body has {size} bytes; the limit is {limit:,} ({setting})"


class BodyLimit:
    """Refuse bodies over `body_limit` before they are read whole (see the module)."""

    def __init__(self, app: ASGIApp, settings: ServiceSettings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        limit, setting = body_limit(self.settings, headers.get("content-type", ""))
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            detail = _message(f"{int(declared):,}", limit, setting)
            answer = JSONResponse({"detail": detail}, 413, {"connection": "close"})
            await answer(scope, receive, send)
            return
        received = 0
        started = over = False

        async def counted() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    raise BodyTooLargeError(_message(f"over {limit:,}", limit, setting))
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if over:  # the server closes the connection instead of reading the rest
                    message = {**message, "headers": [*message.get("headers", []), _CLOSE]}
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BaseException as error:
            # The error handlers answer it when the route itself reads the body; a middleware
            # reading it in a task of its own (Starlette's BaseHTTPMiddleware) lets it out here,
            # in an exception group.
            refused = _refusal(error)
            if refused is None:
                raise
            if not started:
                answer = JSONResponse({"detail": str(refused)}, 413, {"connection": "close"})
                await answer(scope, receive, send)


def _refusal(error: BaseException) -> BodyTooLargeError | None:
    """The `BodyTooLargeError` that `error` is or holds alone, else None."""
    held = getattr(error, "exceptions", None)  # an exception group's (Python 3.10 has none)
    while isinstance(held, tuple) and len(held) == 1:
        error = held[0]
        held = getattr(error, "exceptions", None)
    return error if isinstance(error, BodyTooLargeError) else None
