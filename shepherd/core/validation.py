"""Validation of JSON documents against the schemas in `schemas/`.

The runtime needs a validator that is fast (`fray list` validates every run's
files) and cheap to import. `jsonschema` is neither (tens of milliseconds to
import, ~100 µs per document), so this module compiles the subset of JSON Schema
2020-12 that fray's schemas use into plain closures:

    type, enum, const, properties, required, additionalProperties, items,
    minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength,
    pattern, minItems, maxItems, anyOf, allOf, $defs, and $ref to "#/pointer" or to
    another schema's "name.json#/pointer"

The fast path's generated source is compiled once per process; the code object
is also kept in `schemas/__pycache__/`, as Python keeps its .pyc files (written
only where the package is writable and bytecode writing is on, read back only
when the stored source matches exactly), which saves a `fray list` the ~7 ms of
compiling the meta schema's checks.

Why not fastjsonschema, which also generates code: measured in one run by
`python tests/bench/bench_validation.py` (1,000 runs, medians of 11, a 2-core VM,
2026-11-25), this compiler validates a document in 8.3 µs against 25.4 µs, and
`fray list --json` with its row cache emptied takes 228 ms against 318 ms with
fastjsonschema swapped in (`python -c pass`: 30 ms). fastjsonschema's own
generated code, loaded from a file, starts 16 ms faster than this module with
its code cache (43 vs 59 ms, but without reading fray's schemas); it would also
need a resolver for the cross-file `$ref`s and speaks draft-07, not 2020-12. The
gap in validation decides it: a busy FRAY_HOME validates thousands of documents.

Annotations (title, description, $schema, $id, examples, default, format) are
ignored. A keyword outside this list raises at compile time, so a schema can
never silently be checked less than it says; the test suite also validates every
schema and real output with the reference `jsonschema` package.
"""

from __future__ import annotations

import marshal
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from types import CodeType
from typing import Any, Callable

import orjson

Check = Callable[[Any, str], "list[str]"]

_ANNOTATIONS = {"title", "description", "$schema", "$id", "examples", "default", "format", "$comment"}
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


class SchemaCompileError(Exception):
    pass


def schema_dir() -> Path:
    """Where the schemas are: inside the installed package, or at the top of a checkout."""
    package = Path(__file__).resolve().parent.parent  # fray/ installed, shepherd/ in a checkout
    installed = package / "schemas"
    if (installed / "meta.json").exists():
        return installed
    return package.parent / "schemas"


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    path = schema_dir() / f"{name}.json"
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise SchemaCompileError(f"no schema named {name!r} in {schema_dir()}") from None


@lru_cache(maxsize=None)
def validator(name: str) -> Check:
    """A function (document, path) -> every violation, as 'path: problem' lines."""
    schema = load_schema(name)
    return _compile(schema, schema, {})


@lru_cache(maxsize=None)
def is_valid(name: str) -> Callable[[Any], bool]:
    """A fast yes/no check; the explaining `validator` runs only when it says no."""
    schema = load_schema(name)
    return _FastCompiler().build(schema, name)


def errors(name: str, document: Any) -> list[str]:
    """Every way `document` violates schema `name`, as 'path: problem' lines."""
    if is_valid(name)(document):
        return []
    return validator(name)(document, "$")


# -- the fast path: the schema turned into straight-line Python, booleans only ------

# Exact types, as orjson produces them (and bool is not an int here). A value of
# a subclass fails this fast path and is judged by the explaining validator.
_TYPE_TESTS = {
    "object": "type({v}) is dict",
    "array": "type({v}) is list",
    "string": "type({v}) is str",
    "boolean": "({v} is True or {v} is False)",
    "null": "{v} is None",
    "integer": "type({v}) is int",
    "number": "type({v}) in _NUM",
}
_NUMBER = "type({v}) in _NUM"
_KIND_OF = {"string": "str", "array": "list"}  # a schema type -> the container its length checks measure
_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
_LENGTHS = {"minLength": ("str", ">="), "maxLength": ("str", "<="), "minItems": ("list", ">="), "maxItems": ("list", "<=")}


class _FastCompiler:
    """Generates one Python function per schema (and per $def), compiled once per process."""

    def __init__(self) -> None:
        self.sources: list[str] = []
        self.names: dict[str, str] = {}  # resolved $ref key -> function name
        self.consts: dict[str, Any] = {"_MISSING": object(), "_enum_ok": _enum_ok, "_NUM": frozenset({int, float})}
        self.counter = 0

    def build(self, schema: dict[str, Any], name: str) -> Callable[[Any], bool]:
        entry = self._function(schema, schema)
        namespace = dict(self.consts)
        exec(_compiled("\n\n".join(self.sources), name), namespace)  # noqa: S102 - our own schemas
        return namespace[entry]

    def _fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def _function(self, schema: dict[str, Any] | bool, root: dict[str, Any]) -> str:
        name = self._fresh("_check")
        lines = [f"def {name}(v):", *self._body(schema, "v", 1, root), "    return True"]
        self.sources.append("\n".join(lines))
        return name

    def _const(self, value: Any) -> str:
        name = self._fresh("_C")
        self.consts[name] = value
        return name

    def _body(self, schema: dict[str, Any] | bool, v: str, depth: int, root: dict[str, Any]) -> list[str]:
        """The lines, indented `depth` levels, that return False unless `v` fits `schema`."""
        pad = "    " * depth
        if schema is True or schema == {}:
            return []
        if schema is False:
            return [f"{pad}return False"]
        out: list[str] = []
        # A single type is checked first; the checks after it rely on it and skip their own guards.
        kind = schema.get("type") if isinstance(schema.get("type"), str) else None
        for keyword, arg in sorted(schema.items(), key=lambda pair: pair[0] != "type"):
            if keyword not in _ANNOTATIONS and keyword not in ("$defs", "additionalProperties", "required", "properties"):
                out.extend(self._keyword(keyword, arg, v, depth, root, kind))
        if isinstance(schema, dict) and ("properties" in schema or "required" in schema or "additionalProperties" in schema):
            out.extend(self._properties(schema, v, depth, root, known_dict=kind == "object"))
        return out

    def _keyword(self, keyword: str, arg: Any, v: str, depth: int, root: dict[str, Any], kind: str | None) -> list[str]:
        """The lines that check one keyword on `v`; `kind` is the schema's single type, checked before it."""
        pad = "    " * depth
        if keyword == "type":
            names = [arg] if isinstance(arg, str) else list(arg)
            return [f"{pad}if not ({' or '.join(_TYPE_TESTS[n].format(v=v) for n in names)}): return False"]
        if keyword in ("enum", "const"):
            return [f"{pad}if not {self._enum_test(list(arg) if keyword == 'enum' else [arg], v)}: return False"]
        if keyword in _BOUNDS or keyword in _LENGTHS or keyword == "pattern":
            return [f"{pad}{self._scalar_test(keyword, arg, v, kind)}: return False"]
        if keyword == "items":
            return self._items(arg, v, depth, root, kind)
        if keyword == "anyOf":
            return [f"{pad}if not ({' or '.join(f'{self._function(option, root)}({v})' for option in arg)}): return False"]
        if keyword == "allOf":
            return [f"{pad}if not {self._function(option, root)}({v}): return False" for option in arg]
        if keyword == "$ref":
            return [f"{pad}if not {self._ref(arg, root)}({v}): return False"]
        raise SchemaCompileError(f"keyword {keyword!r} is not supported by fray.core.validation")

    def _enum_test(self, values: list[Any], v: str) -> str:
        """`v` is one of `values`: a set lookup when they are all str or all int (bool is not int here)."""
        exact = {type(a) for a in values}
        if len(exact) == 1 and exact <= {str, int}:  # type() is exact
            return f"(type({v}) is {exact.pop().__name__} and {v} in {self._const(frozenset(values))})"
        return f"_enum_ok({v}, {self._const(values)})"

    def _scalar_test(self, keyword: str, arg: Any, v: str, kind: str | None) -> str:
        """`if <v breaks the bound, length or pattern>`, guarded by its type unless the schema's type is that."""
        if keyword in _BOUNDS:
            guard = "" if kind in ("integer", "number") else f"{_NUMBER.format(v=v)} and "
            return f"if {guard}not ({v} {_BOUNDS[keyword]} {arg!r})"
        if keyword in _LENGTHS:
            container, op = _LENGTHS[keyword]
            guard = "" if _KIND_OF.get(kind) == container else f"type({v}) is {container} and "
            return f"if {guard}not (len({v}) {op} {arg!r})"
        regex = self._const(re.compile(arg))
        guard = "" if kind == "string" else f"type({v}) is str and "
        return f"if {guard}not {regex}.search({v})"

    def _items(self, arg: Any, v: str, depth: int, root: dict[str, Any], kind: str | None) -> list[str]:
        """A loop over `v`'s items (when `v` is a list) checking each against `arg`."""
        item, inner = self._fresh("_x"), depth + (kind != "array")
        out = [] if kind == "array" else [f"{'    ' * depth}if type({v}) is list:"]
        out.append(f"{'    ' * inner}for {item} in {v}:")
        out.extend(self._body(arg, item, inner + 1, root) or [f"{'    ' * (inner + 1)}pass"])
        return out

    def _properties(self, schema: dict[str, Any], v: str, depth: int, root: dict[str, Any],
                    known_dict: bool) -> list[str]:
        out = []
        if not known_dict:
            out.append(f"{'    ' * depth}if type({v}) is dict:")
            depth += 1
        pad = "    " * depth
        props: dict[str, Any] = schema.get("properties", {})
        required = schema.get("required", [])
        if required:
            out.append(f"{pad}if not ({' and '.join(f'{key!r} in {v}' for key in required)}): return False")
        for key, sub in props.items():
            item = self._fresh("_p")
            if key in required:  # present, as just checked
                body = self._body(sub, item, depth, root)
                if body:
                    out.append(f"{pad}{item} = {v}[{key!r}]")
                    out.extend(body)
                continue
            body = self._body(sub, item, depth + 1, root)
            if body:
                out.append(f"{pad}{item} = {v}.get({key!r}, _MISSING)")
                out.append(f"{pad}if {item} is not _MISSING:")
                out.extend(body)
        extra = schema.get("additionalProperties", True)
        if extra is False:
            out.append(f"{pad}if not {self._const(frozenset(props))}.issuperset({v}): return False")
        elif extra is not True:
            known, key, item = self._const(frozenset(props)), self._fresh("_k"), self._fresh("_e")
            out.append(f"{pad}for {key}, {item} in {v}.items():")
            out.append(f"{pad}    if {key} not in {known}:")
            out.extend(self._body(extra, item, depth + 2, root) or [f"{pad}        pass"])
        if len(out) == (0 if known_dict else 1):
            out.append(f"{pad}pass")
        return out

    def _ref(self, ref: str, root: dict[str, Any]) -> str:
        target, document, key = resolve_ref(ref, root)
        if key not in self.names:
            self.names[key] = function = self._fresh("_def")
            lines = [f"def {function}(v):", *self._body(target, "v", 1, document), "    return True"]
            self.sources.append("\n".join(lines))
        return self.names[key]


def _compiled(source: str, name: str) -> CodeType:
    """`compile(source)`, through a cache file that stores the source beside its code object."""
    cache = schema_dir() / "__pycache__" / f"{name}.fast.{sys.implementation.cache_tag}.bin"
    expected = source.encode()
    header = len(expected).to_bytes(4, "little") + expected
    try:
        blob = cache.read_bytes()
        if blob.startswith(header):
            code = marshal.loads(blob[len(header):])
            if isinstance(code, CodeType):
                return code
    except (OSError, ValueError, EOFError, TypeError):  # no cache yet, or a damaged one: compile
        pass
    code = compile(source, f"<fray schema {name}>", "exec")
    if not sys.dont_write_bytecode:
        temporary = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        try:
            cache.parent.mkdir(exist_ok=True)
            temporary.write_bytes(header + marshal.dumps(code))
            os.replace(temporary, cache)
        except OSError:  # a read-only install: compile each time, as Python does without .pyc
            temporary.unlink(missing_ok=True)
    return code


def _enum_ok(value: Any, allowed: list[Any]) -> bool:
    return any(value == a and type(value) is type(a) for a in allowed)


def _compile(schema: dict[str, Any] | bool, root: dict[str, Any], refs: dict[str, Check]) -> Check:
    if schema is True or schema == {}:
        return lambda value, path: []
    if schema is False:
        return lambda value, path: [f"{path}: no value is allowed here"]
    type_check = _type(schema["type"], schema, root, refs) if "type" in schema else None
    checks: list[Check] = []
    for keyword, arg in schema.items():
        if keyword in _ANNOTATIONS or keyword in ("$defs", "additionalProperties", "required", "type"):
            continue
        builder = _KEYWORDS.get(keyword)
        if builder is None:
            raise SchemaCompileError(f"keyword {keyword!r} is not supported by fray.core.validation")
        checks.append(builder(arg, schema, root, refs))
    if "properties" not in schema and ("required" in schema or "additionalProperties" in schema):
        checks.append(_properties({}, schema, root, refs))

    def check(value: Any, path: str) -> list[str]:
        if type_check is not None:
            wrong_type = type_check(value, path)
            if wrong_type:
                return wrong_type  # the other keywords would only repeat it
        found: list[str] = []
        for one in checks:
            found.extend(one(value, path))
        return found

    return check


def _type(arg: str | list[str], schema: dict, root: dict, refs: dict) -> Check:
    names = [arg] if isinstance(arg, str) else list(arg)
    tests = [_TYPES[n] for n in names]
    wanted = " or ".join(names)

    def check(value: Any, path: str) -> list[str]:
        if any(t(value) for t in tests):
            return []
        return [f"{path}: expected {wanted}, got {_describe(value)}"]

    return check


def _enum(arg: list[Any], schema: dict, root: dict, refs: dict) -> Check:
    allowed = list(arg)

    def check(value: Any, path: str) -> list[str]:
        # A str-valued enum's member (fray.core.model.StrEnum) is written as its string: it is that string here.
        plain = str.__str__(value) if isinstance(value, str) else value
        if any(plain == a and type(plain) is type(a) for a in allowed):
            return []
        return [f"{path}: {value!r} is not one of {', '.join(map(repr, allowed))}"]

    return check


def _const(arg: Any, schema: dict, root: dict, refs: dict) -> Check:
    return _enum([arg], schema, root, refs)


def _properties(arg: dict[str, Any], schema: dict, root: dict, refs: dict) -> Check:
    props = {key: _compile(sub, root, refs) for key, sub in arg.items()}
    required = list(schema.get("required", []))
    extra = schema.get("additionalProperties", True)
    extra_check = None if extra in (True, False) else _compile(extra, root, refs)

    def check(value: Any, path: str) -> list[str]:
        if not isinstance(value, dict):
            return []
        found = [f"{path}: missing required field {key!r}" for key in required if key not in value]
        for key, item in value.items():
            sub = props.get(key)
            if sub is not None:
                found.extend(sub(item, f"{path}.{key}"))
            elif extra is False:
                found.append(f"{path}: unexpected field {key!r}")
            elif extra_check is not None:
                found.extend(extra_check(item, f"{path}.{key}"))
        return found

    return check


def _items(arg: dict[str, Any], schema: dict, root: dict, refs: dict) -> Check:
    sub = _compile(arg, root, refs)

    def check(value: Any, path: str) -> list[str]:
        if not isinstance(value, list):
            return []
        found: list[str] = []
        for i, item in enumerate(value):
            found.extend(sub(item, f"{path}[{i}]"))
        return found

    return check


def _bound(op: Callable[[float, float], bool], words: str) -> Callable[..., Check]:
    def build(arg: float, schema: dict, root: dict, refs: dict) -> Check:
        def check(value: Any, path: str) -> list[str]:
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not op(value, arg):
                return [f"{path}: {value!r} must be {words} {arg}"]
            return []

        return check

    return build


def _length(key: str, op: Callable[[int, int], bool], words: str) -> Callable[..., Check]:
    kind = list if key.endswith("Items") else str

    def build(arg: int, schema: dict, root: dict, refs: dict) -> Check:
        def check(value: Any, path: str) -> list[str]:
            if isinstance(value, kind) and not op(len(value), arg):
                return [f"{path}: length {len(value)} must be {words} {arg}"]
            return []

        return check

    return build


def _pattern(arg: str, schema: dict, root: dict, refs: dict) -> Check:
    regex = re.compile(arg)

    def check(value: Any, path: str) -> list[str]:
        if isinstance(value, str) and not regex.search(value):
            return [f"{path}: {value!r} does not match {arg!r}"]
        return []

    return check


def _any_of(arg: list[Any], schema: dict, root: dict, refs: dict) -> Check:
    options = [_compile(sub, root, refs) for sub in arg]

    def check(value: Any, path: str) -> list[str]:
        collected: list[str] = []
        for option in options:
            found = option(value, path)
            if not found:
                return []
            collected.extend(found)
        return [f"{path}: matches none of the allowed forms ({'; '.join(collected)})"]

    return check


def _all_of(arg: list[Any], schema: dict, root: dict, refs: dict) -> Check:
    parts = [_compile(sub, root, refs) for sub in arg]
    return lambda value, path: [problem for part in parts for problem in part(value, path)]


def _ref(arg: str, schema: dict, root: dict, refs: dict) -> Check:
    target, document, key = resolve_ref(arg, root)

    def check(value: Any, path: str) -> list[str]:
        if key not in refs:
            refs[key] = _compile(target, document, refs)
        return refs[key](value, path)

    return check


def resolve_ref(ref: str, root: dict[str, Any]) -> tuple[Any, dict[str, Any], str]:
    """(the schema `ref` points at, the document it lives in, a key naming it).

    `#/pointer` points into `root`; `name.json#/pointer` into schemas/name.json, so
    the --json schemas reuse the state schemas instead of copying them.
    """
    file, _, pointer = ref.partition("#")
    if file and not file.endswith(".json"):
        raise SchemaCompileError(f"unsupported $ref {ref!r}: only 'name.json#/pointer' or '#/pointer'")
    document = load_schema(file[: -len(".json")]) if file else root
    target: Any = document
    for token in filter(None, pointer.split("/")):
        token = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or token not in target:
            raise SchemaCompileError(f"dangling $ref {ref!r}")
        target = target[token]
    return target, document, f"{document.get('$id', file)}#{pointer}"


def _describe(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "integer", float: "number"}.get(type(value), type(value).__name__)


_KEYWORDS: dict[str, Callable[..., Check]] = {
    "enum": _enum,
    "const": _const,
    "properties": _properties,
    "items": _items,
    "minimum": _bound(lambda v, a: v >= a, ">="),
    "maximum": _bound(lambda v, a: v <= a, "<="),
    "exclusiveMinimum": _bound(lambda v, a: v > a, ">"),
    "exclusiveMaximum": _bound(lambda v, a: v < a, "<"),
    "minLength": _length("minLength", lambda n, a: n >= a, ">="),
    "maxLength": _length("maxLength", lambda n, a: n <= a, "<="),
    "minItems": _length("minItems", lambda n, a: n >= a, ">="),
    "maxItems": _length("maxItems", lambda n, a: n <= a, "<="),
    "pattern": _pattern,
    "anyOf": _any_of,
    "allOf": _all_of,
    "$ref": _ref,
}
