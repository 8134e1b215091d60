"""The address a request comes from, behind a reverse proxy or not (django-axes' AXES_CLIENT_IP_CALLABLE).

Behind nginx every request arrives from the proxy's address, so a lockout keyed on REMOTE_ADDR
puts everyone in one bucket and anyone can lock any account. The proxy's X-Forwarded-For says who
the client was, but anyone can send that header: it is believed only when the request comes from
an address in TRUSTED_PROXIES, and then read from the right (the hops our proxies appended), the
client being the first address no trusted proxy holds. Whatever the client itself wrote in the
header stands to the left of that and is never reached.
"""

from __future__ import annotations

import ipaddress
from functools import cache
from typing import Any

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@cache
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def is_trusted_proxy(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _networks(tuple(settings.TRUSTED_PROXIES)))


def client_ip(request: Any) -> str:
    remote = request.META.get("REMOTE_ADDR", "")
    if not is_trusted_proxy(remote):
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return remote  # not what a proxy of ours writes: keep the proxy's own address
        if not is_trusted_proxy(hop):
            return hop
    return hops[0] if hops else remote
