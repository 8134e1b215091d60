"""API rate limits that never take the API down with the cache.

DRF's throttles keep their counters in Django's cache (Redis in production).
When that cache is unreachable the stock throttle raises and every API call,
read-only ones included, is a 500. Rate limiting is a protection against a
runaway script, not a gate: while the cache is down the limit is not applied
and a warning is logged. Logins are not protected by this throttle but by
django-axes, which counts failures in the database.
"""

from __future__ import annotations

import logging
import time

from redis.exceptions import RedisError
from rest_framework.throttling import UserRateThrottle

log = logging.getLogger(__name__)

# What a cache backend raises when its server is down or too slow.
CACHE_ERRORS = (RedisError, OSError)
_WARN_EVERY_SECONDS = 60.0
_last_warning = 0.0


def _warn_cache_down(exc: Exception) -> None:
    global _last_warning
    now = time.monotonic()
    if now - _last_warning >= _WARN_EVERY_SECONDS:  # one line a minute, not one per request
        _last_warning = now
        log.warning("API rate limit not applied: the cache is unreachable (%s: %s)", type(exc).__name__, exc)


class FailOpenUserRateThrottle(UserRateThrottle):
    """UserRateThrottle that lets the request through when the cache is down."""

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except CACHE_ERRORS as exc:
            _warn_cache_down(exc)
            return True
