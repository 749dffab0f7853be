"""Dotted-key overrides of a profile (``--set nodes.count=3``): parsing
them from the command line, applying them to the profile's data before it
is validated, and naming the nearest existing key for a mistyped one; and
a profile laid over the one it ``extends`` (``extends: local``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .errors import ProfileError
from .paths import PROFILES_DIR


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["nodes.count=3"]`` -> ``{"nodes.count": 3}`` (values parsed as YAML).

    Raises:
        ProfileError: an item has no ``=``.
    """
    result: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ProfileError(f"override {item!r} is not KEY=VALUE")
        key, value = item.split("=", 1)
        result[key.strip()] = yaml.safe_load(value)
    return result


def set_path(data: dict, dotted: str, value: Any) -> None:
    """Set ``data``'s value at ``dotted`` (``"nodes.count"``), making the
    mappings on the way.

    Raises:
        ProfileError: a key on the way holds something other than a mapping.
    """
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ProfileError(f"override {dotted}: {key} is not a mapping")
    node[keys[-1]] = value


def check_property_override(data: dict, key: str) -> None:
    """``--set properties.<group>.<name>.…`` may change a property the
    profile has, not invent one (a typo would otherwise read as a new,
    incomplete property).

    Raises:
        ProfileError: no such property; names the nearest existing id.
    """
    parts = key.split(".")
    if parts[0] != "properties" or len(parts) < 4:
        return
    ids = [f"{g}.{n}" for g, specs in (data.get("properties") or {}).items() for n in (specs or {})]
    want = f"{parts[1]}.{parts[2]}"
    if want not in ids:
        near = difflib.get_close_matches(want, ids, n=1, cutoff=0.6)
        hint = f"; did you mean properties.{near[0]}?" if near else f"; the profile has {', '.join(ids)}"
        raise ProfileError(f"override {key}: the profile has no property {want}{hint}")


def nearest_key(model: Any, loc: tuple) -> str | None:
    """For a mistyped key at ``loc`` (e.g. ("nodes", "cuont")) of the pydantic
    ``model`` (a :class:`refarch.profile.Profile`), the existing dotted key it
    most resembles ("nodes.count"), by difflib's ratio; None when none does."""
    for part in loc[:-1]:
        field = getattr(model, "model_fields", {}).get(str(part))
        if field is None:
            return None
        model = field.annotation
        for candidate in getattr(model, "__args__", ()):  # Optional[X] -> X
            if hasattr(candidate, "model_fields"):
                model = candidate
    names = list(getattr(model, "model_fields", {}))
    match = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
    return ".".join([*(str(p) for p in loc[:-1]), match[0]]) if match else None


def merged(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``child`` laid over ``base``: mappings merge key by key (recursively),
    anything else in ``child`` (a list, a value) replaces ``base``'s."""
    out = dict(base)
    for key, value in child.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def with_base(data: dict[str, Any], read: Callable[[str], dict[str, Any]], seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A profile's data with the profile it ``extends`` (read by name with
    ``read``) merged under it (:func:`merged`), to any depth; the
    ``extends`` key itself is dropped.

    Raises:
        ProfileError: a profile extends itself, directly or not.
    """
    data = dict(data)
    base = data.pop("extends", None)
    if base is None:
        return data
    if base in seen:
        raise ProfileError(f"profile {data.get('name', '?')}: extends {base}, which extends it back "
                           f"({' -> '.join((*seen, base))})")
    return merged(with_base(read(base), read, (*seen, base)), data)


def profile_names() -> list[str]:
    """Names of the profiles shipped in ``descriptors/profiles``."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yml"))


def read_profile(name_or_path: str) -> dict[str, Any]:
    """A profile's raw data, by name (``descriptors/profiles/<name>.yml``)
    or by path, before :func:`with_base` and validation.

    Raises:
        ProfileError: unknown profile, or not valid YAML (one line).
    """
    path = Path(name_or_path)
    if not (path.suffix in (".yml", ".yaml") and path.is_file()):
        path = PROFILES_DIR / f"{name_or_path}.yml"
    if not path.is_file():
        raise ProfileError(f"unknown profile {name_or_path!r}; available: {', '.join(profile_names())}")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ProfileError(f"profile {path.name}: not valid YAML: {exc}".replace("\n", " ")) from None
