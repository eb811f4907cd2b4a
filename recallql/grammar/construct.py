"""`trusted`: a pydantic model built from values already of its field types, without validation.

Used where a statement builds many small models from internal values (bound literals, plans,
result rows and reasons): pydantic's own `model_construct` costs more than validating.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["trusted"]

M = TypeVar("M", bound=BaseModel)
_set = object.__setattr__
_new = object.__new__  # BaseModel defines no __new__
#: Per model class: its fields in order with their defaults (None: required or a factory) and
#: the fields whose default comes from a factory.
_TEMPLATES: dict[type, tuple[dict[str, Any], tuple[tuple[str, Any], ...]]] = {}


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """`cls(**values)` without validation, for internal values already of the field types
    (floats and ints from numpy's `tolist()`, enum members, str; never user input).

    The instance is what `cls.model_construct(**values)` builds — fields in declaration order,
    the given names as the fields set — without its per-field default look-up, which costs
    more than validating (about 1 µs against 2 for a `ReasonEntry`; a statement builds ~50).

    Raises:
        TypeError: `cls` has private attributes, a post-init hook or extra fields allowed (a
            model whose construction needs more than its fields).
    """
    template = _TEMPLATES.get(cls)
    if template is None:
        template = _TEMPLATES[cls] = _template(cls)
    fields, factories = template
    data = {**fields, **values}
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    obj = _new(cls)
    _set(obj, "__dict__", data)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


def _template(cls: type[BaseModel]) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...]]:
    if cls.__private_attributes__ or cls.__pydantic_post_init__ \
            or cls.model_config.get("extra") == "allow":
        raise TypeError(f"{cls.__name__} needs validation to be constructed")
    fields = {name: None if f.is_required() or f.default_factory is not None else f.default
              for name, f in cls.model_fields.items()}
    factories = tuple((name, f.default_factory) for name, f in cls.model_fields.items()
                      if f.default_factory is not None)
    return fields, factories
