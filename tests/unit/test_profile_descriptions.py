"""Every field of the profile's models carries a description (the
reference page lists every profile key with its type, default and
description)."""

import typing

from pydantic import BaseModel

from refarch.profile import Profile


def _models(annotation, seen: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """``annotation``'s pydantic models and those they nest, through
    Optional, list and dict annotations, each once."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return seen
        seen.append(annotation)
        for info in annotation.model_fields.values():
            _models(info.annotation, seen)
    for arg in typing.get_args(annotation):
        _models(arg, seen)
    return seen


def test_the_walk_finds_the_nested_models():
    names = {m.__name__ for m in _models(Profile, [])}
    assert {"Profile", "Nodes", "Flavor", "Expect", "Headroom", "JobWatch", "PropertySpec", "Bounds", "Source",
            "Smoke", "ReferenceCurve", "OpenStackSettings"} <= names


def test_every_profile_field_has_a_description():
    missing = [f"{model.__name__}.{name}" for model in _models(Profile, [])
               for name, info in model.model_fields.items() if not (info.description or "").strip()]
    assert not missing, f"fields without a description: {', '.join(missing)}"
