"""Which provider sources an audit uses, and the one call that builds a wheel's closure from them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cudaship import cachedir
from cudaship.providers.cache import DiskCache
from cudaship.providers.closure import resolve_closure
from cudaship.providers.constraints import Constraints
from cudaship.providers.http import Client
from cudaship.providers.index import IndexSource
from cudaship.providers.records import Closure, Fetched, Target
from cudaship.providers.sources import EnvSource, KnowledgeSource, Source, WheelhouseSource


@dataclass(frozen=True)
class ProviderOptions:
    """Where requirements are looked up. The default (the library's) is the knowledge table only; the CLI
    adds the package index unless ``--offline``."""

    env: str | None = None  #: a Python interpreter or a site-packages directory
    find_links: tuple[str, ...] = ()  #: wheelhouse directories
    index_url: str | None = None  #: a PEP 691 index (``https://pypi.org/simple``); None: no index
    offline: bool = False  #: the index only through its on-disk cache
    cache_dir: Path | None = None  #: None: :func:`cudaship.cachedir.root`
    no_cache: bool = False
    #: hosts the index's file URLs may lead to besides its own and those it is known to serve files from
    index_hosts: tuple[str, ...] = ()
    #: pins: only versions these allow are taken, from every source (``--constraint``, ``--replay``)
    constraints: Constraints = Constraints()  # noqa: RUF009 (frozen: one shared empty value is safe)
    #: the index's files uploaded after this are ignored (``--exclude-newer``; PEP 700 upload times)
    exclude_newer: dt.datetime | None = None
    #: a replay: the date the replayed report resolved at, recorded again (None: the time the audit starts)
    resolved_at: str | None = None

    def sources(self, client: Client) -> list[Source]:
        out: list[Source] = []
        if self.env:
            out.append(EnvSource(self.env))
        out.extend(WheelhouseSource(d) for d in self.find_links)
        if self.index_url:
            cache = DiskCache(None if self.no_cache else (self.cache_dir or cachedir.root()))
            out.append(
                IndexSource(
                    self.index_url,
                    cache,
                    client,
                    offline=self.offline,
                    allowed_hosts=self.index_hosts,
                    exclude_newer=self.exclude_newer,
                )
            )
        return out


def target_python(tags: Sequence[str]) -> str:
    """The Python version to evaluate markers for: ``cp311`` → ``3.11``; ``abi3``/``py3`` wheels → 3.12."""
    for tag in tags:
        interp, _, rest = tag.partition("-")
        abi = rest.split("-", 1)[0]
        if interp.startswith("cp") and interp[2:].isdigit() and abi != "abi3" and len(interp) >= 4:
            return f"{interp[2]}.{interp[3:]}"
    return "3.12"


def closure_for(
    requires_dist: Sequence[str],
    target: Target,
    options: ProviderOptions,
    *,
    extras: Sequence[str] | None = None,
    own_name: str | None = None,
) -> tuple[Closure, Fetched]:
    """The wheel's closure from ``options``' sources (the knowledge table answers when none can), and what
    the index cost."""
    client = Client()
    sources = options.sources(client)
    closure = resolve_closure(
        requires_dist,
        target,
        sources,
        extras=extras,
        fallback=KnowledgeSource(),
        own_name=own_name,
        constraints=options.constraints,
    )
    return closure, client.fetched
