"""ApiVersions (key 18): the APIs and versions served (``versions.SUPPORTED``).

v3+ carries the client's software name and version, which must match Kafka's pattern, else
INVALID_REQUEST with no API list (``ApiVersionsRequest.isValid``). No features are reported
(a finalized ``transaction.version`` would switch Java clients to transactions v2). A version
above the served range never reaches here (``codec.api_versions_unsupported``).
"""

from __future__ import annotations

import re
from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.versions import SUPPORTED, ApiKey

SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def handle_api_versions(request: Request) -> Any:
    """The ApiVersions response to ``request``."""
    body = request.body
    valid = request.api_version < 3 or (
        SOFTWARE_PATTERN.fullmatch(body.client_software_name or "") is not None
        and SOFTWARE_PATTERN.fullmatch(body.client_software_version or "") is not None)
    keys = [{"api_key": key, "min_version": served.min_version,
             "max_version": served.max_version} for key, served in sorted(SUPPORTED.items())]
    return build(response_class(ApiKey.API_VERSIONS, request.api_version), {
        "error_code": ErrorCode.none if valid else ErrorCode.invalid_request,
        "api_keys": keys if valid else [],
        "throttle_time": 0,
    })
