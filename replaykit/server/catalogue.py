"""The catalogue (provider wing): the cassettes loaded, in order, and the slots they are served from.

:class:`Catalogue` loads (paths, folders, :class:`~replaykit.cassette.Cassette` objects), unloads, adds stubs
and lists; every change goes through the shared :class:`~replaykit.server.exchange.State`'s lock, so it is
safe while serving. The fake provider and the admin API both use it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace

from replaykit import cassette as cassette_mod
from replaykit.cassette import Cassette, Interaction
from replaykit.contracts import Profile, resolve_profile
from replaykit.errors import UsageError
from replaykit.resources import find_cassette
from replaykit.routes import classify_uri
from replaykit.server.exchange import State
from replaykit.server.matching import Slot, is_named, slots_of

__all__ = ["STUBS", "CassetteSource", "Catalogue", "Loaded", "declared_profile", "loaded"]

CassetteSource = str | os.PathLike[str] | Cassette
Loaded = list[tuple[str, Cassette]]  # each cassette with its label, in order
STUBS = "<stubs>"  # the cassette that interactions added one by one (stub()) go to


def _sources(cassettes: CassetteSource | Iterable[CassetteSource]) -> list[CassetteSource]:
    if isinstance(cassettes, str | os.PathLike | Cassette):
        return [cassettes]
    return list(cassettes)


def loaded(cassettes: CassetteSource | Iterable[CassetteSource],
           max_body: int = cassette_mod.MAX_BODY) -> Loaded:
    """Each cassette named (files, folders of them, or :class:`Cassette` objects) with its label, in order;
    a name is found as the command line finds it (:func:`~replaykit.resources.find_cassette`); a file's
    compressed bodies may decode to ``max_body`` bytes at most."""
    found: Loaded = []
    for number, source in enumerate(_sources(cassettes)):
        if isinstance(source, Cassette):
            found.append((str(source.path) if source.path else f"<cassette {number}>", source))
            continue
        found += [(str(path), cassette_mod.load(path, max_body=max_body))
                  for path in cassette_mod.iter_paths([find_cassette(source)])]
    return found


def declared_profile(tapes: Iterable[tuple[str, Cassette]]) -> Profile:
    """The contract profile the cassettes declare (``replaykit: {profile: ...}``), ``strict`` when none does;
    cassettes that declare different ones are a usage error (choose one with ``profile=`` / ``--profile``)."""
    named = {label: tape.meta.extra["profile"] for label, tape in tapes if "profile" in tape.meta.extra}
    if len(set(named.values())) > 1:
        listed = ", ".join(f"{label}: {name}" for label, name in named.items())
        raise UsageError(f"the cassettes declare different contract profiles ({listed}); "
                         "choose one with --profile (profile=...)")
    return resolve_profile(next(iter(named.values()), None))


class Catalogue:
    """The cassettes ``state`` serves; ``profile`` (None: the one they declare) judges their traffic."""

    def __init__(self, state: State, profile: Profile | None, max_body: int = cassette_mod.MAX_BODY) -> None:
        self.state, self.profile, self.max_body = state, profile, max_body
        self.tapes: Loaded = []

    def load(self, cassettes: CassetteSource | Iterable[CassetteSource], *, add: bool = False) -> None:
        """Replace the loaded cassettes (usage starts afresh), or with ``add`` load them after the others."""
        found = loaded(cassettes, self.max_body)
        with self.state.lock:
            kept = self.tapes if add else []
            slots = [*self.state.pool.slots] if add else []
            self._install([*kept, *found], slots + [s for label, tape in found
                                                    for s in slots_of(label, tape.interactions)])

    def _install(self, tapes: Loaded, slots: list[Slot]) -> None:
        """Serve ``slots`` from now on, judged by the profile ``tapes`` declare (call under the lock)."""
        profile = self.profile or declared_profile(tapes)
        self.tapes, self.state.pool.slots = tapes, slots
        self.state.settings = replace(self.state.settings, profile=profile)

    def unload(self, names: Iterable[str] = ()) -> list[str]:
        """Unload the cassettes ``names`` name (as ``x-replaykit-cassette`` does), every one when none is
        given; returns the labels unloaded."""
        wanted = list(names)
        with self.state.lock:
            labels = list(dict.fromkeys(s.cassette for s in self.state.pool.slots))
            gone = [label for label in labels if not wanted or any(is_named(label, n) for n in wanted)]
            self._install([(label, tape) for label, tape in self.tapes if label not in gone],
                          [slot for slot in self.state.pool.slots if slot.cassette not in gone])
        return gone

    def stub(self, interaction: Interaction) -> dict[str, object]:
        """Add one interaction to the cassette ``<stubs>``: ``{cassette, index, line, route}``."""
        with self.state.lock:
            slots = self.state.pool.slots
            index = sum(1 for slot in slots if slot.cassette == STUBS)
            route = classify_uri(interaction.request.method, interaction.request.uri)
            slot = Slot(STUBS, index, interaction, route)
            self.state.pool.slots = [*slots, slot]
        return {**slot.where(), "route": route.name}

    def listed(self) -> list[dict[str, object]]:
        """The cassettes loaded, in order: ``{cassette, interactions, routes}`` each."""
        rows: dict[str, tuple[int, list[str]]] = {}
        with self.state.lock:
            for slot in self.state.pool.slots:
                count, routes = rows.get(slot.cassette, (0, []))
                if slot.route.name not in routes:
                    routes.append(slot.route.name)
                rows[slot.cassette] = (count + 1, routes)
        return [{"cassette": label, "interactions": count, "routes": routes}
                for label, (count, routes) in rows.items()]
