"""Small helpers shared by the SDK's data classes: key lookup in wire objects and camelCase -> snake_case."""

import re
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

_ACRONYMS = (("GPUs", "Gpus"), ("GPU", "Gpu"), ("RDMA", "Rdma"), ("ID", "Id"))
_CAMEL_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """``availableGPUs`` -> ``available_gpus``, ``enableRDMA`` -> ``enable_rdma``, ``gprId`` -> ``gpr_id``."""
    for acronym, word in _ACRONYMS:
        name = name.replace(acronym, word)
    name = _CAMEL_1.sub(r"\1_\2", name)
    name = _CAMEL_2.sub(r"\1_\2", name)
    return name.lower()


def first_of(obj: Dict[str, Any], keys: Iterable[str]) -> Any:
    """The value of the first key of ``keys`` that ``obj`` holds with a non-null value, else ``None``."""
    for key in keys:
        value = obj.get(key)
        if value is not None:
            return value
    return None


def build_fields(obj: Any, fields: Iterable[Tuple[str, Tuple[str, ...]]]) -> Dict[str, Any]:
    """Map a wire object to keyword arguments: ``fields`` is ``(attribute, (wire keys...))`` pairs.

    A missing or non-dict ``obj`` gives every attribute ``None``.
    """
    if not isinstance(obj, dict):
        obj = {}
    return {attr: first_of(obj, keys) for attr, keys in fields}


def format_repr(obj: Any, attrs: Iterable[str], skip_none: bool = True) -> str:
    """``ClassName(a='x', b=1)`` over ``attrs``; attributes that are ``None`` are left out."""
    parts = []
    for attr in attrs:
        value = getattr(obj, attr, None)
        if value is None and skip_none:
            continue
        parts.append("%s=%r" % (attr, value))
    return "%s(%s)" % (type(obj).__name__, ", ".join(parts))


def as_list(value: Optional[Any]) -> list:
    """``value`` when it is a list, ``[]`` for ``None`` or anything else."""
    return value if isinstance(value, list) else []


class Record(object):
    """What the SDK's data classes share: equal when of the same class with equal attributes,
    unhashable (they are mutable), and ``ClassName(a=..)`` over ``_REPR_ATTRS`` as their repr."""

    _REPR_ATTRS: Sequence[str] = ()

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        return format_repr(self, self._REPR_ATTRS)
