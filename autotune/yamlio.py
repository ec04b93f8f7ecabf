"""YAML in, with its lines kept: duplicate keys are errors, and later checks can name the line.

Every YAML the tool reads (spaces, seeds, a template's declaration) goes through here: safe
loading only (no tags that run code), text that must be UTF-8, and mappings that remember where
each key stood, so that a schema error says `file:line` and not just `file`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from .types import UserError


class Mapping(dict):
    """A YAML mapping that knows the line (1-based, in its file) of each of its keys."""

    line: int = 0
    key_lines: dict

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


class _Loader(yaml.SafeLoader):
    first_line = 1  # line of the text's first line in its file


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> Mapping:
    loader.flatten_mapping(node)
    out = Mapping()
    out.line = node.start_mark.line + loader.first_line
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            ) from None
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {out.key_lines[key]})", key_node.start_mark
            )
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + loader.first_line
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse(text: str, where: str, first_line: int = 1) -> Any:
    """YAML text -> Python data (mappings as `Mapping`); bad YAML is one UserError naming `where`
    and the line."""
    loader = None
    try:
        loader = _Loader(text)  # its reader already refuses control characters
        loader.first_line = first_line
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        at = f"{where}:{mark.line + first_line}" if mark else where
        raise UserError(f"{at}: malformed YAML: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()


# Inputs are configs, shape lists and replay tables: kilobytes, a few megabytes at most. A path
# such as /dev/zero would otherwise be read until memory runs out.
MAX_INPUT_BYTES = 64 << 20


def read_text(path: Path | str) -> str:
    """A text file that must be UTF-8; any failure is one UserError naming it. A pipe is read to
    its end (`--shapes-file <(...)`), and one that nothing writes to reads as empty instead of
    waiting for ever."""
    try:
        # Not blocking in open: a FIFO's open would wait for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        with os.fdopen(fd, "rb") as f:
            os.set_blocking(fd, True)  # a pipe with a writer is then read to its end
            raw = f.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > MAX_INPUT_BYTES:
        raise UserError(f"{path}: more than {MAX_INPUT_BYTES >> 20} MiB, too large for an input file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None


def read(path: Path | str) -> Any:
    """A YAML file through the safe loader; a missing file, bad text or bad YAML is one UserError."""
    return parse(read_text(path), str(path))


def where(path: str, data: Any, key: Any = None) -> str:
    """`path:line` of `key` in `data` (a Mapping), or of `data` itself; `path` when unknown."""
    if isinstance(data, Mapping):
        return f"{path}:{data.line_of(key) if key is not None else data.line}"
    return path


def check_keys(data: Any, allowed: tuple[str, ...], path: str, what: str) -> None:
    """`data` is a mapping whose keys are all among `allowed`."""
    if not isinstance(data, dict):
        raise UserError(f"{where(path, data)}: {what} must be a mapping (keys: {', '.join(allowed)})")
    for key in data:
        if key not in allowed:
            raise UserError(f"{where(path, data, key)}: unknown key {key!r} in {what} (allowed: {', '.join(allowed)})")
