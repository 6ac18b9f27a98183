"""The Content-Security-Policy of docsim's own pages (the search page and the explanation page,
which shows user text): their inline scripts run by hash, nothing else runs, nothing loads from
elsewhere, and no other site may frame them."""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib.resources import files

PAGES = ("index.html", "explain.html")
# an inline script that runs: not one with a `src`, nor a data block (type application/json)
_SCRIPT = re.compile(r"<script(?![^>]*\b(?:src|type)=)[^>]*>(.*?)</script>", re.DOTALL)


def _script_hashes() -> list[str]:
    hashes = []
    for page in PAGES:
        html = files("docsim.app").joinpath(f"web/{page}").read_text(encoding="utf-8")
        for body in _SCRIPT.findall(html):
            digest = hashlib.sha256(body.encode("utf-8")).digest()
            hashes.append(f"'sha256-{base64.b64encode(digest).decode()}'")
    return hashes


@cache
def content_security_policy() -> str:
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src {' '.join(_script_hashes())}",
            "style-src 'unsafe-inline'",  # the pages' own style blocks; no script runs from CSS
            "img-src 'self' data: blob:",
            "connect-src 'self'",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )
