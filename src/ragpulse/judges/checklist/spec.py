"""Checklist definitions (business judges from configuration) and their loading.

A checklist is declared under ``checklists`` in the config file, inline or as a path to a YAML file holding
the same mapping (a relative path written in the config file is resolved against the file's directory when the
file is there, else the working directory — :mod:`ragpulse.config` applies that one rule when it loads the
file; a path from the environment is relative to the working directory). Fields and item
kinds (``contains``, ``regex``, ``link``, ``length``, ``rubric`` with an optional ``offline`` rule) are
described in ``docs/reference-metrics.md`` ("Checklists"); examples in ``config/checklists/``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragpulse.errors import ConfigError

__all__ = [
    "Checklist",
    "ChecklistItem",
    "ContainsRule",
    "LengthRule",
    "LinkRule",
    "RegexRule",
    "RubricItem",
    "Rule",
    "load_checklists",
]

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class _Item(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    description: str = ""


class ContainsRule(_Item):
    """Phrases the answer must (``any``/``all``) or must not (``none``) contain (case-insensitive)."""

    kind: Literal["contains"] = "contains"
    any: tuple[str, ...] = ()
    all: tuple[str, ...] = ()
    none: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _some(self) -> ContainsRule:
        if not (self.any or self.all or self.none):
            raise ValueError(f"contains item {self.id!r} needs any, all or none")
        return self


class RegexRule(_Item):
    """A regular expression that must match the answer (``match: false``: must not)."""

    kind: Literal["regex"] = "regex"
    pattern: str
    match: bool = True
    ignore_case: bool = True

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"invalid regex {v!r}: {e}") from e
        return v


class LinkRule(_Item):
    """The answer links to an allowed domain (or a subdomain); ``only_allowed``: no other domains either."""

    kind: Literal["link"] = "link"
    domains: tuple[str, ...]
    only_allowed: bool = False

    @field_validator("domains")
    @classmethod
    def _norm(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        out = tuple(d.strip().lower().lstrip(".") for d in v if d.strip())
        if not out:
            raise ValueError("link item needs at least one domain")
        return out


class LengthRule(_Item):
    """Answer length bounds in characters (after trimming whitespace)."""

    kind: Literal["length"] = "length"
    min_chars: int | None = Field(default=None, ge=0)
    max_chars: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _bounds(self) -> LengthRule:
        if self.min_chars is None and self.max_chars is None:
            raise ValueError(f"length item {self.id!r} needs min_chars or max_chars")
        if self.min_chars is not None and self.max_chars is not None and self.min_chars > self.max_chars:
            raise ValueError(f"length item {self.id!r}: min_chars > max_chars")
        return self


Rule = Annotated[ContainsRule | RegexRule | LinkRule | LengthRule, Field(discriminator="kind")]


class RubricItem(_Item):
    """A requirement judged by the judge model (``rubric`` text), with an optional offline rule."""

    kind: Literal["rubric"] = "rubric"
    rubric: str
    offline: Rule | None = None

    @model_validator(mode="before")
    @classmethod
    def _offline_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("offline"), dict):
            data = dict(data)
            data["offline"] = {"id": data.get("id", ""), **data["offline"]}
        return data


ChecklistItem = Annotated[
    ContainsRule | RegexRule | LinkRule | LengthRule | RubricItem, Field(discriminator="kind")
]


class Checklist(BaseModel):
    """One checklist: a business judge named ``name`` (see the module docstring for the fields)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str
    description: str = ""
    mode: Literal["share", "all"] = "share"
    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    apps: tuple[str, ...] = ()
    scenarios: tuple[str, ...] = ()
    items: tuple[ChecklistItem, ...]

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(f"checklist name {v!r} must match [a-z][a-z0-9_]*")
        return v

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int | float) else v

    @model_validator(mode="after")
    def _items(self) -> Checklist:
        if not self.items:
            raise ValueError(f"checklist {self.name!r} has no items")
        ids = [i.id for i in self.items]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"checklist {self.name!r}: duplicate item id(s) {', '.join(dup)}")
        return self

    @property
    def effective_threshold(self) -> float:
        """The pass threshold: 1.0 in mode ``all``, else ``threshold``."""
        return 1.0 if self.mode == "all" else self.threshold

    def applies_to(self, app: str | None, scenario: str | None) -> bool:
        """True when the trace's app and scenario are in the lists (an empty list matches anything)."""
        return (not self.apps or app in self.apps) and (not self.scenarios or scenario in self.scenarios)


#: A key shown by name in an error (a setting-like word); other keys of a file are counted, not echoed: a path
#: that names another file (``/etc/shadow``) must not print its lines.
_KEY_LIKE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,39}$")


def _yaml_problem(e: yaml.YAMLError) -> str:
    """What is wrong with a YAML text and where (line, column), without quoting the text."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or type(e).__name__
    return (
        f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(problem)
    )


def _read_file(name: str, p: Path) -> Any:
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"checklist {name!r}: file not found: {p}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"checklist {name!r}: {p} is not a checklist: not UTF-8 text") from e
    except RecursionError as e:
        raise ConfigError(f"checklist {name!r}: {p} is not a checklist: nested too deeply") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"checklist {name!r}: {p} is not valid YAML: {_yaml_problem(e)}") from e
    except OSError as e:  # a directory, no permission …
        raise ConfigError(f"checklist {name!r}: {p} cannot be read: {e.strerror or type(e).__name__}") from e


def _parse(name: str, raw: Any, base_dir: Path | None) -> Checklist:
    source: Path | None = None
    if isinstance(raw, str | Path):
        source = Path(raw)
        if not source.is_absolute() and base_dir is not None:
            source = base_dir / source
        raw = _read_file(name, source)
    if not isinstance(raw, dict):
        if source is not None:
            raise ConfigError(
                f"checklist {name!r}: {source} is not a checklist: expected a YAML mapping with version and items"
            )
        raise ConfigError(f"checklist {name!r} must be a mapping or a path to a YAML file")
    if source is not None:
        fields = set(Checklist.model_fields)
        unknown = [k for k in raw if str(k) not in fields]
        if unknown:
            shown = sorted(str(k) for k in unknown if _KEY_LIKE.match(str(k)))
            hidden = len(unknown) - len(shown)
            what = ", ".join([*shown, *([f"{hidden} that are not setting names"] if hidden else [])])
            raise ConfigError(
                f"checklist {name!r}: {source} is not a checklist: unknown key(s) {what} (expected a YAML "
                f"mapping with version and items; optional: description, mode, threshold, apps, scenarios)"
            )
    try:
        return Checklist(name=name, **{k: v for k, v in raw.items() if k != "name"})
    except ValidationError as e:
        lines = [f"  {'.'.join(str(x)[:100] for x in err['loc'])}: {err['msg']}" for err in e.errors()]
        where = f"{source} " if source is not None else ""
        raise ConfigError(f"checklist {name!r} {where}is invalid:\n" + "\n".join(lines)) from e


def load_checklists(raw: dict[str, Any], base_dir: Path | None = None) -> dict[str, Checklist]:
    """Parse ``settings.judge.checklists`` (``{name: mapping or YAML path}``) into :class:`Checklist` objects.

    A relative path is relative to ``base_dir`` when given, else to the working directory (the config loader
    has already resolved paths written in the config file; see :mod:`ragpulse.config`).

    Raises:
        ConfigError: a file is missing or not YAML, or a checklist is invalid (bad regex, no items, …).
    """
    return {name: _parse(name, value, base_dir) for name, value in raw.items()}
