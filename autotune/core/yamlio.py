"""YAML in, with its lines kept: duplicate keys are errors, and later checks can name the line.

Every YAML the tool reads (spaces, seeds, a template's declaration) goes through here: safe
loading only, text that must be UTF-8, and mappings that remember where each key stood, so that
a schema error says `file:line` and not just `file`.
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
                None, None, f"duplicate key {shown(key)} (first at line {out.key_lines[key]})", key_node.start_mark
            )
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + loader.first_line
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


# What one YAML text may hold. The largest the tool ships (a template's declaration, a space)
# are tens of kilobytes. Aliases repeat a node without repeating its text: nested (an alias of
# a list of aliases of ...) 13 lines stood for hundreds of millions of values, and the error
# message that quoted them ran to 312 MB. So the size counts what the aliases expand to.
MAX_TEXT_CHARS = 1_000_000
MAX_EXPANDED = 2_000_000  # nodes plus the characters of their scalars, every alias expanded
SHOWN_CHARS = 80  # of a value quoted in an error message


def parse(text: str, where: str, first_line: int = 1) -> Any:
    """Parse YAML text into Python data, mappings as `Mapping`.

    Args:
        text: The YAML text.
        where: What to name in an error (usually the file).
        first_line: The line of the text's first line in its file.

    Raises:
        UserError: Bad YAML (naming `where` and the line), or text above MAX_TEXT_CHARS, or whose
            aliases expand past MAX_EXPANDED (refused before it is built).
    """
    if len(text) > MAX_TEXT_CHARS:
        raise UserError(f"{where}: {len(text):,} characters of YAML, more than the {MAX_TEXT_CHARS:,} read")
    loader = None
    try:
        loader = _Loader(text)  # its reader already refuses control characters
        loader.first_line = first_line
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded(node, where, first_line) > MAX_EXPANDED:
            raise UserError(
                f"{where}: its aliases expand to more than {MAX_EXPANDED:,} values and characters "
                "(aliases nested in aliases?); write the values out"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        at = f"{where}:{mark.line + first_line}" if mark else where
        raise UserError(f"{at}: malformed YAML: {_cut(problem)}") from None
    except RecursionError:
        raise UserError(f"{where}: YAML nested too deeply") from None
    except ValueError as exc:  # a scalar no Python value holds (an integer of 5,000 digits)
        raise UserError(f"{where}: malformed YAML: {_cut(str(exc))}") from None
    finally:
        if loader is not None:
            loader.dispose()


# Inputs are configs, shape lists and replay tables: kilobytes, a few megabytes at most. A path
# such as /dev/zero would otherwise be read until memory runs out.
MAX_INPUT_BYTES = 64 << 20


def _cut(text: str, limit: int = 200) -> str:
    """Return the first line of a parser's message, cut to `limit` characters."""
    first = (text.splitlines() or [""])[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _expanded(root: yaml.Node, where: str, first_line: int) -> int:
    """Return the size of a composed document with every alias expanded, stopping past MAX_EXPANDED.

    A node counts 1, a scalar its characters too; each distinct node is counted once, so the count
    is linear in the text whatever the expansion. An alias inside the node it names (`&x [16, *x]`)
    would expand for ever: a UserError naming `where` and the anchor's line.
    """
    size: dict[int, int] = {}
    open_: set[int] = set()  # the nodes being counted: the path from the root to the one on top
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        if isinstance(node, yaml.ScalarNode):
            size[id(node)] = 1 + len(node.value)
            continue
        kids = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else list(node.value)
        if children_done:
            size[id(node)] = min(1 + sum(size[id(k)] for k in kids), MAX_EXPANDED + 1)
            open_.discard(id(node))
        elif id(node) in open_:  # reached again below itself: it contains itself
            line = node.start_mark.line + first_line
            raise UserError(f"{where}:{line}: a recursive alias (an alias inside the node its anchor names)")
        else:
            open_.add(id(node))
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in size)
    return size[id(root)]


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """Return `repr(value)` for an error message, cut to `limit` characters.

    A value from a file may be as long as the file, or (aliases) far longer: containers are rendered
    only as far as the limit reaches.
    """
    out: list[str] = []
    left = [limit + 1]

    def emit(text: str) -> None:
        out.append(text[: left[0]])
        left[0] -= len(out[-1])

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            items, (opening, closing) = [x for kv in v.items() for x in kv], "{}"
        elif isinstance(v, (list, tuple)):
            items, (opening, closing) = v, "[]" if isinstance(v, list) else "()"
        else:
            try:
                emit(repr(v) if not isinstance(v, str) else repr(v[: left[0] + 2]))
            except ValueError:  # an integer too long to print
                emit(f"<a {type(v).__name__} too long to print>")
            return
        emit(opening)
        for i, item in enumerate(items):
            if left[0] <= 0:
                return
            if i:
                emit(": " if isinstance(v, dict) and i % 2 else ", ")
            walk(item)
        emit(closing)

    walk(value)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_text(path: Path | str) -> str:
    """Read a text file that must be UTF-8; any failure is one UserError naming it.

    A pipe is read to its end (`--shapes-file <(...)`), and one that nothing writes to reads as empty
    instead of waiting for ever.
    """
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
    """Read a YAML file with the safe loader; a missing file, bad text or YAML is a UserError."""
    return parse(read_text(path), str(path))


def where(path: str, data: Any, key: Any = None) -> str:
    """Return `path:line` of `key` in `data` (a Mapping), or of `data`; `path` when unknown."""
    if isinstance(data, Mapping):
        return f"{path}:{data.line_of(key) if key is not None else data.line}"
    return path


def check_keys(data: Any, allowed: tuple[str, ...], path: str, what: str) -> None:
    """Check that `data` is a mapping whose keys are all among `allowed`."""
    if not isinstance(data, dict):
        raise UserError(f"{where(path, data)}: {what} must be a mapping (keys: {', '.join(allowed)})")
    for key in data:
        if key not in allowed:
            raise UserError(
                f"{where(path, data, key)}: unknown key {shown(key)} in {what} (allowed: {', '.join(allowed)})"
            )
