"""Where the browser may go: the origin allow list of browser navigation.

Every navigation of the task page's main frame is checked, whatever started it: `goto`, a click
on a link, a form submission, a script, `goBack`, a Vue Router action, and every redirect on the
way (each hop is checked before it is requested, through Chromium's request interception). A
navigation to an origin that is not on the list is refused before anything is sent; the action
that caused it fails with a message naming the origin.

Entries (`serve-tasks --allow-origin`, `TaskToolSet(browser_allow=...)`):

| entry | allows |
|---|---|
| `http://host:port`, `https://host` | that origin exactly (the scheme's default port when none is given) |
| `host`, `host:port` | that host over http and https, on any port / on that port |
| `*` | every http and https origin |
| `file:`, `data:`, `javascript:` | that scheme (refused unless listed: they read local files or run code) |

`about:blank` is always allowed, and so is the origin of the start page (`--start-url`). With
no entries, the browser may open nothing else: the list is an allow list, empty by default.
Only the main frame is checked: subresources and frames inside an allowed page load as the page
says. Pages the site opens itself (popups, `target=_blank`) are closed at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from ...errors import ConfigError

__all__ = ["NavigationPolicy", "origin_of"]

_SPECIAL = ("file", "data", "javascript")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str:
    """`scheme://host:port` of an http(s) URL (default port filled in), or `scheme:` otherwise."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in _DEFAULT_PORTS:
        try:
            port = parts.port or _DEFAULT_PORTS[scheme]
        except ValueError:
            return f"{scheme}://{(parts.hostname or '').lower()}"
        host = (parts.hostname or "").lower()
        shown = f"[{host}]" if ":" in host else host
        return f"{scheme}://{shown}:{port}"
    return f"{scheme}:"


@dataclass(frozen=True)
class NavigationPolicy:
    """The parsed allow list. Build it with `NavigationPolicy.parse(entries)`."""

    any_web: bool = False
    schemes: frozenset[str] = frozenset()
    origins: frozenset[tuple[str, str, int]] = frozenset()
    hosts: frozenset[tuple[str, int | None]] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> NavigationPolicy:
        """Read allow list entries (see the module docstring).

        Raises:
            ConfigError: `ERR_CONFIG` naming an entry that is none of the forms.
        """
        any_web = False
        schemes: set[str] = set()
        origins: set[tuple[str, str, int]] = set()
        hosts: set[tuple[str, int | None]] = set()
        for raw in entries:
            entry = str(raw).strip()
            low = entry.lower()
            if entry == "*":
                any_web = True
                continue
            special = low.rstrip("/")
            if special.endswith(":") and special[:-1] in _SPECIAL:
                schemes.add(special[:-1])
                continue
            try:
                if "://" in low:
                    parts = urlsplit(low)
                    if (
                        parts.scheme not in _DEFAULT_PORTS
                        or not parts.hostname
                        or parts.path not in ("", "/")
                    ):
                        raise ValueError
                    if parts.query or parts.fragment or parts.username or parts.password:
                        raise ValueError
                    origins.add((parts.scheme, parts.hostname, parts.port or _DEFAULT_PORTS[parts.scheme]))
                else:
                    parts = urlsplit(f"//{low}")
                    if not parts.hostname or parts.path or parts.query or parts.username:
                        raise ValueError
                    hosts.add((parts.hostname, parts.port))
            except ValueError:
                raise ConfigError(
                    f"browser allow list entry {entry[:100]!r} is not an origin (http://host:port), a host "
                    "(host or host:port), '*' or one of file:, data:, javascript:",
                    code="ERR_CONFIG",
                ) from None
        return cls(any_web, frozenset(schemes), frozenset(origins), frozenset(hosts))

    def with_origin_of(self, url: str) -> NavigationPolicy:
        """The same list, plus the origin of `url` (the start page)."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme in _DEFAULT_PORTS and parts.hostname:
            origin = (scheme, parts.hostname.lower(), parts.port or _DEFAULT_PORTS[scheme])
            return NavigationPolicy(self.any_web, self.schemes, self.origins | {origin}, self.hosts)
        if scheme == "file":
            return NavigationPolicy(self.any_web, self.schemes | {scheme}, self.origins, self.hosts)
        return self

    def refusal(self, url: str) -> str | None:
        """Why the main frame may not navigate to `url`, or None when it may."""
        if url.strip().lower() in ("about:blank", "about:srcdoc"):
            return None
        try:
            parts = urlsplit(url.strip())
            scheme = parts.scheme.lower()
            port = parts.port
        except ValueError:
            return "it is not a valid URL"
        if scheme in _DEFAULT_PORTS:
            host = (parts.hostname or "").lower()
            if not host:
                return "it names no host"
            port = port or _DEFAULT_PORTS[scheme]
            if self.any_web or (scheme, host, port) in self.origins:
                return None
            if (host, None) in self.hosts or (host, port) in self.hosts:
                return None
            return (
                f"{origin_of(url)} is not on the browser allow list "
                "(serve-tasks --allow-origin ORIGIN, or browser_allow=[...], adds it)"
            )
        if scheme in self.schemes:
            return None
        if scheme in _SPECIAL:
            return (
                f"{scheme}: URLs are refused unless the browser allow list names {scheme}: "
                f"(serve-tasks --allow-origin {scheme}:)"
            )
        return f"the scheme {scheme or '(none)'!r} is not one the browser may open"
