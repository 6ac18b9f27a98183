"""The schemathesis CLI's hooks for docsim (`tests.utils.openapi_fuzz`), loaded with
`SCHEMATHESIS_HOOKS=tests.utils.openapi_fuzz_hooks` from the repository's root."""

from __future__ import annotations

import schemathesis

from tests.utils.openapi_fuzz import adapt_valid_case, keeps_case

schemathesis.hook("filter_case")(keeps_case)
schemathesis.hook("map_case")(adapt_valid_case)
