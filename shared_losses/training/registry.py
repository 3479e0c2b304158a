"""One registry type for the variants an application trains with (its objectives, its encoder losses): the entries
by name, the command-line choices they make, their ``--help`` lines and the check that refuses a hyper-parameter an
entry does not use.

Each application declares its entries as a frozen dataclass derived from :class:`Entry` (adding what its loop and
checks read, e.g. the loss) and one :class:`Registry` per option::

    OBJECTIVES = Registry("--aux", [Objective("curl", "biased (CURL)", 0, loss=..., uses=("positives",)), ...],
                          neutral={"tau_plus": 0.0, "positives": 1, "beta": 1.0})
    AuxName = OBJECTIVES.choices          # the configuration field's type: a new entry is a new choice
    OBJECTIVES.get("curl").loss(pos=..., neg=..., ...)

A loss is reached through its entry with keyword arguments only (each application documents the one signature of
its kind of data), so the loop never asks which entry it has by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Iterable, Iterator, Literal, Mapping, TypeVar


@dataclass(frozen=True)
class Entry:
    """What every registry entry has: its option value (``name``), its row in tables and plots (``label``), the
    row's place (``rank``), its line in ``--help`` and the hyper-parameters that apply to it (``uses``; the others
    must keep the registry's neutral value)."""

    name: str
    label: str
    rank: int
    help: str = ""
    uses: tuple[str, ...] = ()


E = TypeVar("E", bound=Entry)


def flag(field: str) -> str:
    """A configuration field as its command-line option: ``tau_plus`` -> ``--tau-plus``."""
    return "--" + field.replace("_", "-")


def _shown(value: Any) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


class Registry(Generic[E]):
    """The entries of one option (``option``: ``--aux``, ``--objective``, ``--contrastive``), in declaration order.

    Read like a dict (``name in reg``, ``reg[name]``, iteration over names, ``items()``, ``values()``);
    :meth:`get` is the lookup that refuses an unknown name in one line naming the choices. ``neutral`` maps each
    hyper-parameter some entry uses to the value that means "not used" (:meth:`check_fields`)."""

    def __init__(self, option: str, entries: Iterable[E], neutral: Mapping[str, Any] | None = None):
        self.option = option
        self.neutral = dict(neutral or {})
        self._entries: dict[str, E] = {}
        for entry in entries:
            if entry.name in self._entries:
                raise ValueError(f"{option}: two entries are named {entry.name!r}")
            missing = [f for f in entry.uses if f not in self.neutral]
            if missing:
                raise ValueError(f"{option} {entry.name}: uses {', '.join(missing)}, which the registry has no "
                                 "neutral value for")
            self._entries[entry.name] = entry

    # ------------------------------------------------------------------------------ reading

    def get(self, name: str) -> E:
        """The entry ``name``; a ``ValueError`` naming the option and its choices if there is none."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise ValueError(f"{self.option} must be one of {', '.join(self._entries)}, got {name!r}") from None

    def __getitem__(self, name: str) -> E:
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self):
        """The names, in declaration order."""
        return self._entries.keys()

    def values(self):
        """The entries, in declaration order."""
        return self._entries.values()

    def items(self):
        """``(name, entry)`` pairs, in declaration order."""
        return self._entries.items()

    def where(self, **attributes: Any) -> tuple[str, ...]:
        """The names of the entries whose attributes have the given values (``where(trains_encoder=False)``)."""
        return tuple(n for n, e in self._entries.items()
                     if all(getattr(e, k) == v for k, v in attributes.items()))

    def ranked(self) -> list[E]:
        """The entries in table order (``rank``, then declaration order)."""
        return sorted(self._entries.values(), key=lambda e: e.rank)

    @property
    def choices(self):
        """The configuration field's type: ``Literal`` of the names, so a new entry is a new choice."""
        return Literal[tuple(self._entries)]

    def help_text(self, where: str = "") -> str:
        """The option's choices as ``--help`` shows them: each name and its entry's ``help`` line (``where`` names the
        registry, e.g. ``rl_curl.objectives.OBJECTIVES``)."""
        lines = [f"choices of {self.option}" + (f" ({where})" if where else "") + ":"]
        width = max((len(n) for n in self._entries), default=0)
        lines += [f"  {name.ljust(width)}  {entry.help}".rstrip() for name, entry in self._entries.items()]
        return "\n".join(lines)

    # ------------------------------------------------------------------------------ checks

    def check_fields(self, name: str, fields: Mapping[str, Any]) -> None:
        """Refuse a hyper-parameter that entry ``name`` does not use but ``fields`` sets away from its neutral value
        (it would be silently ignored): a ``ValueError`` naming the option, the value, the entries it applies to
        and the value ``name`` takes."""
        entry = self.get(name)
        for field, neutral in self.neutral.items():
            if field in entry.uses or field not in fields or fields[field] == neutral:
                continue
            users = [n for n, e in self._entries.items() if field in e.uses]
            applies = f"only applies to {self.option} {' or '.join(users)}" if users else f"applies to no {self.option}"
            raise ValueError(f"{flag(field)} {_shown(fields[field])} {applies}; {self.option} {name} takes "
                             f"{flag(field)} {_shown(neutral)}")
