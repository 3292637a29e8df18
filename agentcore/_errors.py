"""Exceptions that survive ``pickle`` and ``copy`` whatever their ``__init__`` takes.

``BaseException.__reduce__`` rebuilds an exception as ``cls(*self.args)``: one whose ``__init__``
takes other arguments than the message it passes up (``SessionError(code, message, path=)``)
cannot be unpickled at all (a worker process's error never reaches the parent, ``copy.copy``
raises) or comes back wrong (its message formatted into itself again). :class:`PicklableError`
rebuilds the instance without calling ``__init__``: the same ``args``, then its attributes.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type

__all__ = ["PicklableError"]


def _rebuilt(cls: Type[BaseException], args: Tuple[Any, ...]) -> BaseException:
    return cls.__new__(cls, *args)  # BaseException.__new__ keeps args; __init__ is not run


class PicklableError:
    """Mixin for an exception class (``class SessionError(PicklableError, Exception)``): its
    instances, and its subclasses', pickle and copy with their ``args`` and attributes."""

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...], Optional[Dict[str, Any]]]:
        error: Any = self
        return (_rebuilt, (type(self), error.args), error.__dict__ or None)
