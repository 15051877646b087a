"""Where the server may send requests to AI endpoints, and with which key.

A study's base URL is typed by a researcher: hostile input. Three rules hold for every
request the provider makes (``assistants.provider.complete``):

1. **Keys stay with their endpoints** (``site_key_for``): the site's ``OVERSIGHT_AI_API_KEY``
   goes only to the site's ``OVERSIGHT_AI_BASE_URL``; a study that names another endpoint
   sends its own key or none. A study's saved key is dropped when its endpoint changes
   (``key_after_change``), so a key saved for one endpoint never follows the URL elsewhere.
2. **Only allowed hosts** (``endpoint_check``): the URL is ``http`` or ``https`` without
   user or password, and its host matches ``OVERSIGHT_AI_ALLOWED_HOSTS`` — exact names,
   ``.example.org`` for a domain and its subdomains, ``*`` for any host, IP addresses and
   CIDR networks. Default: the site endpoint's host only. Checked when a study is saved and
   again before each request.
3. **No internal addresses** (``address_refusal``): every address a host name resolves to
   must be globally routable — loopback, private (RFC 1918, unique-local IPv6), link-local
   (with the cloud metadata address 169.254.169.254), shared (100.64.0.0/10), multicast,
   reserved and unspecified addresses are refused unless the address lies in an IP address
   or network listed in ``OVERSIGHT_AI_ALLOWED_HOSTS`` (a listed *name* does not make its
   addresses acceptable: DNS can be re-pointed). IPv4-mapped, NAT64 and 6to4 IPv6 addresses
   are judged by the IPv4 address inside them. At request time the check runs on the very
   addresses the connection is made to (``GuardedBackend``), after name resolution, so a
   name cannot be re-pointed at an internal address between the save and the request.

The site's own endpoint is the operator's configuration, not user input: requests to
exactly ``OVERSIGHT_AI_BASE_URL`` skip rule 3 (a local vLLM on the loopback works without
listing it). Redirects are never followed and environment proxies are not used.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore2
import httpx2

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]

NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")
SHARED = ipaddress.IPv4Network("100.64.0.0/10")
PROTOCOL_ASSIGNMENTS = ipaddress.IPv4Network("192.0.0.0/24")
METADATA = ipaddress.IPv4Address("169.254.169.254")
SETTING = "OVERSIGHT_AI_ALLOWED_HOSTS"


class EndpointRefused(Exception):
    """The endpoint may not be called; the message says why and which setting decides."""


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (TCP), in the resolver's order."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise EndpointRefused(f"the host '{host}' could not be resolved ({exc.strerror or exc})"
                              ) from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class EgressPolicy:
    """The operator's allow-list (``names`` and ``networks`` parsed from
    ``OVERSIGHT_AI_ALLOWED_HOSTS``), the site's endpoint and the resolver used."""

    names: tuple[str, ...]
    networks: tuple[IPNetwork, ...]
    site_base_url: str = ""
    resolver: Resolver = resolve
    # what the refusals name: the setting that decides and what is called (webhooks have
    # their own allow-list, ``annotations.webhooks``)
    setting: str = SETTING
    noun: str = "AI endpoint"

    @classmethod
    def parse(cls, entries: Sequence[str], *, site_base_url: str = "",
              resolver: Resolver = resolve, setting: str = SETTING,
              noun: str = "AI endpoint") -> EgressPolicy:
        """Entries: ``*``, a host name, ``.domain``, an IP address or a CIDR network (IPv6
        in brackets or bare). Empty entries are ignored; anything else unparseable is a
        ValueError naming it (a typo must not widen or silently narrow the list)."""
        names: list[str] = []
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower()
            if not entry:
                continue
            bare = entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry
            try:
                networks.append(ipaddress.ip_network(bare, strict=False))
                continue
            except ValueError:
                pass
            if "/" in entry or ":" in entry or " " in entry:
                raise ValueError(f"{setting}: '{raw.strip()}' is neither a host name nor an IP "
                                 "address or network")
            names.append(entry)
        return cls(tuple(names), tuple(networks), site_base_url.strip(), resolver, setting,
                   noun)

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        literal = ip_literal(host)
        if literal is not None:
            return "*" in self.names or self.address_listed(literal)
        return any(name == "*" or host == name
                   or (name.startswith(".") and (host == name[1:] or host.endswith(name)))
                   for name in self.names)

    def address_listed(self, address: IPAddress) -> bool:
        return any(address in net for net in self.networks if net.version == address.version)

    def is_site(self, base_url: str) -> bool:
        return bool(self.site_base_url) and same_endpoint(base_url, self.site_base_url)


def policy_from_settings(*, resolver: Resolver = resolve) -> EgressPolicy:
    """The policy of ``OVERSIGHT_AI_ALLOWED_HOSTS`` (None: the site endpoint's host, as a
    name, so its internal addresses stay refused) and ``OVERSIGHT_AI_BASE_URL``."""
    from django.conf import settings

    site = getattr(settings, "OVERSIGHT_AI_BASE_URL", "") or ""
    entries = getattr(settings, SETTING, None)
    if entries is None:
        # the site endpoint's host as a *name* only: an IP address here must not open its
        # internal network (the exact site endpoint passes as the site's, any port else no)
        host = (urlsplit(site).hostname or "").lower().rstrip(".")
        return EgressPolicy((host,) if host else (), (), site.strip(), resolver)
    return EgressPolicy.parse(list(entries), site_base_url=site, resolver=resolver)


def allow_list_errors(make_policy: Callable[[], EgressPolicy], check_id: str,
                      where: str) -> list:
    """The system check of an allow-list setting: an error naming the entry when it does not
    parse (a typo must stop the server, not widen the list nor fail a researcher's save)."""
    from django.core import checks

    try:
        make_policy()
    except ValueError as exc:
        return [checks.Error(str(exc), hint="Host names, .domains, *, IP addresses or CIDR "
                             f"networks, comma-separated ({where}).", id=check_id)]
    return []


def ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def address_refusal(address: IPAddress) -> str | None:
    """Why ``address`` is internal ("loopback", "private", …), or None for a globally
    routable one."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address_refusal(address.ipv4_mapped)
        if address in NAT64:
            return address_refusal(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if address in SIX_TO_FOUR:
            return address_refusal(ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF))
        if address in SITE_LOCAL:
            return "private (site-local)"
    if address.is_loopback:
        return "loopback"
    if address == METADATA:
        return "link-local (the cloud metadata service)"
    if address.is_link_local:
        return "link-local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in SHARED:
        return "shared (carrier-grade NAT)"
    if address.is_reserved or (isinstance(address, ipaddress.IPv4Address)
                               and address in PROTOCOL_ASSIGNMENTS):
        return "reserved"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "reserved"
    return None


def same_endpoint(a: str, b: str) -> bool:
    """Two base URLs name the same endpoint: scheme, host, port (the scheme's default
    filled in) and path without trailing slashes, case-insensitive in scheme and host."""
    return _endpoint_key(a) == _endpoint_key(b)


def _endpoint_key(url: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(url.strip())
    try:
        port = _port(parts)
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port, parts.path.rstrip("/")


def _port(parts) -> int | None:
    """The URL's port, the scheme's default filled in; ValueError for an invalid one."""
    return parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())


def endpoint_check(base_url: str, *, policy: EgressPolicy | None = None,
                   resolve_names: bool = True) -> None:
    """Raise EndpointRefused unless ``base_url`` may be called (rules 2 and 3 of the module's
    docstring). With ``resolve_names`` the host's addresses are looked up and checked too
    (when a study is saved); the request itself checks them again at connection time."""
    policy = policy or policy_from_settings()
    url = base_url.strip()
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise EndpointRefused(f"'{_shown(url)}' is not an http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused("the URL carries a user name or password: put the key in the "
                              "AI key box instead")
    try:
        port = _port(parts)
    except ValueError:
        raise EndpointRefused(f"'{_shown(url)}' has an invalid port") from None
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise EndpointRefused(f"'{_shown(url)}' names no host")
    if policy.is_site(url):
        return
    if not policy.host_allowed(host):
        raise EndpointRefused(f"the host '{host}' is not among the {policy.noun} hosts this "
                              f"server allows ({policy.setting}; ask the operator)")
    literal = ip_literal(host)
    if literal is not None:
        addresses_check(host, [str(literal)], policy)
    elif resolve_names:
        addresses_check(host, policy.resolver(host, port), policy)


def addresses_check(host: str, addresses: Sequence[str], policy: EgressPolicy) -> None:
    """Refuse when any of ``host``'s addresses is internal and not listed by the operator
    (a name with one internal address among public ones is refused whole)."""
    if not addresses:
        raise EndpointRefused(f"the host '{host}' resolves to no address")
    for text in addresses:
        address = ipaddress.ip_address(text.split("%")[0])
        why = address_refusal(address)
        if why and not policy.address_listed(address):
            shown = host if ip_literal(host) is not None else f"{host} ({address})"
            raise EndpointRefused(f"{shown} is a {why} address: {policy.noun}s on internal "
                                  f"addresses must be listed by the operator "
                                  f"({policy.setting})")


def site_key_for(base_url: str, study_key: str, site_key: str, site_base_url: str) -> str:
    """The key a request to ``base_url`` carries: the study's own, else the site's key when
    ``base_url`` is the site's endpoint, else none."""
    if study_key:
        return study_key
    return site_key if site_base_url and same_endpoint(base_url, site_base_url) else ""


def key_after_change(*, old_url: str, new_url: str, saved_key: str, typed_key: str) -> str:
    """The key to store when a study's settings are saved: the one typed in, else the saved
    one while the endpoint stays the same, else none (a key belongs to its endpoint)."""
    if typed_key:
        return typed_key
    return saved_key if same_endpoint(old_url or "", new_url or "") else ""


def _shown(url: str, limit: int = 80) -> str:
    return url if len(url) <= limit else url[:limit] + "…"


# ------------------------------------------------------------------ the guarded connection


class GuardedBackend(httpcore2.NetworkBackend):
    """httpcore's network backend with rule 3 at connection time: the host is resolved
    here, every address checked, and the connection made to a checked address (TLS still
    verifies the certificate against the URL's host name). ``trusted`` (the site's own
    endpoint) skips the address check."""

    def __init__(self, policy: EgressPolicy, *, trusted: bool) -> None:
        self.policy = policy
        self.trusted = trusted
        self._inner = httpcore2.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Any = None) -> httpcore2.NetworkStream:
        literal = ip_literal(host)
        addresses = [str(literal)] if literal is not None else self.policy.resolver(host, port)
        if not self.trusted:
            addresses_check(host, addresses, self.policy)
        last: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(address, port, timeout=timeout,
                                               local_address=local_address,
                                               socket_options=socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore2.NetworkStream:
        raise EndpointRefused(f"{self.policy.noun}s are reached over TCP only")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class GuardedTransport(httpx2.HTTPTransport):
    """httpx's transport on a ``GuardedBackend``, ignoring environment proxies."""

    def __init__(self, policy: EgressPolicy, *, trusted: bool) -> None:
        super().__init__(trust_env=False)
        limits = httpx2.Limits(max_connections=20, max_keepalive_connections=10)
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(policy, trusted=trusted))


def http_client(policy: EgressPolicy, *, base_url: str, timeout: float) -> httpx2.Client:
    """The HTTP client of one endpoint: guarded connections, no redirects followed, no
    environment proxies."""
    return httpx2.Client(transport=GuardedTransport(policy, trusted=policy.is_site(base_url)),
                         follow_redirects=False, trust_env=False, timeout=timeout)
