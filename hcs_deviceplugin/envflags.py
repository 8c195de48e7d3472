"""Every flag of a command also read from an ``HCS_`` environment variable; a flag given wins.

A DaemonSet sets its settings as environment (from a ConfigMap, a Secret, the downward API) as
often as arguments, and NVIDIA's device plugin reads one variable per flag, so operators expect
the same here. The variable is the flag's long name in capitals with ``-`` as ``_`` behind ``HCS_``
(``--pools-dir`` ↔ ``HCS_POOLS_DIR``), and each flag's ``--help`` names it.

A value from the environment is checked exactly as the flag's value would be (its type, its
choices), and a bad one is an error naming the variable, never silently the default. A switch
(``--in-cluster``) reads ``true``/``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``), and
one its variable turns on can only be turned off there (the flags have no ``--no-`` form); a
repeated flag (``--backend-option``) reads its items separated by whitespace, and the flag given
even once replaces them all. An empty variable counts as not set (``HCS_KUBECONFIG=`` is no
kubeconfig, not the current directory).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping

PREFIX = "HCS_"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


class EnvironmentValueError(ValueError):
    """A variable's value that its flag would refuse; the message names the variable."""


def variable_name(action: argparse.Action) -> str | None:
    """``HCS_POOLS_DIR`` for ``--pools-dir``; ``None`` for an action no variable stands for."""
    if isinstance(action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction):
        return None
    long = next((option for option in action.option_strings if option.startswith("--")), None)
    if long is None:
        return None
    return PREFIX + long[2:].upper().replace("-", "_")


def document(parser: argparse.ArgumentParser) -> None:
    """Add ``[env HCS_...]`` to the help of every flag of ``parser`` that a variable stands for."""
    for action in parser._actions:
        name = variable_name(action)
        if name is not None and action.help is not argparse.SUPPRESS:
            action.help = f"{action.help} [env {name}]" if action.help else f"[env {name}]"


def environment_defaults(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> dict[str, object]:
    """``{dest: value}`` for every flag of ``parser`` whose variable is set in ``environ``.

    Raises :class:`EnvironmentValueError` for the first value the flag would refuse.
    """
    defaults: dict[str, object] = {}
    for action in parser._actions:
        name = variable_name(action)
        if name is None or not environ.get(name, "").strip():
            continue
        defaults[action.dest] = _value(action, name, environ[name])
    return defaults


def apply_environment(
    parser: argparse.ArgumentParser,
    argv: list[str],
    parsed: argparse.Namespace,
    environ: Mapping[str, str],
    reparse: Callable[[list[str]], argparse.Namespace],
) -> tuple[argparse.Namespace, dict[str, str]]:
    """``parsed`` with each flag not given in ``argv`` taken from its variable, where one is set;
    and ``{flag: variable}`` for the flags whose value came from a variable.

    The variables become ``parser``'s defaults and ``argv`` is parsed again (``reparse``), so a flag
    given still wins. A repeated flag would add its items to the default list instead of replacing
    it, so where ``parsed`` (read without the variables) has items of its own, those are kept alone.
    A value that differs from ``parsed``'s came from the variable (one equal to it needs no credit).
    """
    defaults = environment_defaults(parser, environ)
    if not defaults:
        return parsed, {}
    parser.set_defaults(**defaults)
    again = reparse(argv)
    taken: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._AppendAction) and getattr(parsed, action.dest, None):
            setattr(again, action.dest, getattr(parsed, action.dest))
        name = variable_name(action)
        if name is not None and getattr(again, action.dest) != getattr(parsed, action.dest):
            taken[next(o for o in action.option_strings if o.startswith("--"))] = name
    return again, taken


def mention_variables(message: str, taken: Mapping[str, str]) -> str:
    """``message`` with the first mention of each flag in ``taken`` followed by its variable.

    An error about ``--pools-dir`` set as ``HCS_POOLS_DIR`` reads ``--pools-dir (HCS_POOLS_DIR)``,
    so an operator who never typed the flag still knows where the value came from.
    """
    for flag, name in taken.items():
        message = re.sub(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", f"{flag} ({name})", message, count=1)
    return message


def _value(action: argparse.Action, name: str, text: str) -> object:
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        word = text.strip().lower()
        if word not in _TRUE | _FALSE:
            raise EnvironmentValueError(f"{name}={text!r}: expected true or false")
        on = word in _TRUE
        return on if isinstance(action, argparse._StoreTrueAction) else not on
    if isinstance(action, argparse._AppendAction):
        return [_one(action, name, item) for item in text.split()]
    return _one(action, name, text)


def _one(action: argparse.Action, name: str, text: str) -> object:
    if text == "--":  # argparse drops it from "--flag=--" too (see cli.refuse_bare_separator)
        raise EnvironmentValueError(f"{name}={text!r}: '--' is not a value")
    convert = action.type if callable(action.type) else str
    try:
        value = convert(text)
    except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
        reason = (
            str(exc) if isinstance(exc, argparse.ArgumentTypeError) else f"not a valid {_type_name(action)}"
        )
        raise EnvironmentValueError(f"{name}={text!r}: {reason}") from None
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise EnvironmentValueError(f"{name}={text!r}: expected one of {choices}")
    return value


def _type_name(action: argparse.Action) -> str:
    return getattr(action.type, "__name__", "value")
