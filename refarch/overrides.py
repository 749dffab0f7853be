"""Dotted-key overrides of a profile (``--set nodes.count=3``): parsing
them from the command line, applying them to the profile's data before it
is validated, and naming the nearest existing key for a mistyped one.
"""

from __future__ import annotations

import difflib
from typing import Any

import yaml

from .errors import ProfileError


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
