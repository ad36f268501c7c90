"""Two rules on the shape of the program's code (core, app and ui), checked on its source.

No function is longer than MAX_LINES or more complex than MAX_COMPLEXITY.

A function's length is from its `def` line to its last line (docstring and comments included,
decorators not). Its complexity is McCabe's, counted here over the syntax tree (this test is
the one place the figure comes from): 1, plus one for each
- `if` and `elif` (an `elif` is an `if` nested in the `else`), and each ternary `a if c else b`;
- `for`, `async for` and `while`, and one more when the loop has an `else`;
- `except` handler;
- `case` of a `match`;
- extra operand of `and` / `or` (`a and b and c` adds two);
- `for` and `if` clause of a comprehension.
`with`, `assert`, `return`, `break`, `continue` and `try` itself add nothing. A nested function
(or class) is measured on its own and adds nothing to the function around it; a lambda is part
of the function it is written in. Methods and nested functions are named with their outer
names: `core/context/builder.py:BuildCache.prepare`.

No comment or docstring quotes a measured timing ("takes 40 ms", "3.2 s on this machine", "was
99 → 19 ms"): the figure goes stale the day the code or the machine changes, and a reader cannot
tell. Timings belong in the benchmarks (tests/bench); a comment says the reason without the
figure. TIMING finds a number followed by a unit of time in each comment and in each line of a
docstring, once the text in double quotes is taken out (a sample of output, a header's
"retrying in 5 s", is not a measurement). There is no allowlist: a constant's configured delay
is in its code, and its comment says what it is for.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "app", "ui")
MAX_LINES = 120
MAX_COMPLEXITY = 25
TIMING = re.compile(r"\d\s*(?:ns|µs|us|ms|s|secs?|seconds?|milliseconds?|minutes?|mins?|hours?)\b",
                    re.IGNORECASE)
QUOTED = re.compile(r'"[^"\n]*"')


@dataclass(frozen=True)
class Shape:
    name: str
    lines: int
    complexity: int

    @property
    def too_big(self) -> bool:
        return self.lines > MAX_LINES or self.complexity > MAX_COMPLEXITY


def complexity(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """McCabe complexity of `func` by the module's counting rule."""
    count = 1
    todo: list[ast.AST | None] = [*func.args.defaults, *func.args.kw_defaults, *func.body]
    while todo:
        node = todo.pop()
        if node is None or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef
                                      | ast.ClassDef):
            continue  # measured on its own
        if isinstance(node, ast.If | ast.IfExp | ast.ExceptHandler | ast.match_case):
            count += 1
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            count += 1 + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        todo.extend(ast.iter_child_nodes(node))
    return count


def shapes(path: Path) -> Iterator[Shape]:
    """Every function of the module at `path`, methods and nested functions included."""
    where = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def walk(node: ast.AST, outer: str) -> Iterator[Shape]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{outer}.{child.name}" if outer else child.name
                if not isinstance(child, ast.ClassDef):
                    end = child.end_lineno or child.lineno
                    yield Shape(f"{where}:{name}", end - child.lineno + 1, complexity(child))
                yield from walk(child, name)
            else:
                yield from walk(child, outer)

    yield from walk(tree, "")


def sources() -> list[Path]:
    """Every module of the program's packages."""
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def all_shapes() -> list[Shape]:
    return [s for path in sources() for s in shapes(path)]


def test_no_function_is_too_long_or_too_complex() -> None:
    found = all_shapes()
    for package in PACKAGES:  # the walk found each package at all
        assert sum(s.name.startswith(f"{package}/") for s in found) > 100, package
    offenders = [f"{s.name}: {s.lines} lines, complexity {s.complexity}"
                 for s in found if s.too_big]
    assert not offenders, (f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY}; split "
                           "them:\n" + "\n".join(offenders))


def test_the_counting_rule_on_small_functions() -> None:
    source = '''
def flat(a):
    return a

def branches(a, b, xs):
    if a and b or a:               # if +1, `and` +1, `or` +1
        pass
    elif b:                        # +1
        pass
    for x in xs:                   # +1, its else +1
        pass
    else:
        pass
    try:
        pass
    except ValueError:             # +1
        pass
    ys = [x for x in xs if x if a]  # for +1, two ifs +2
    z = a if b else None           # +1
    def inner(c):                  # on its own: 2
        return c or a
    return ys, z, inner
'''
    tree = ast.parse(source)
    funcs = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    assert complexity(funcs["flat"]) == 1
    assert complexity(funcs["branches"]) == 12
    assert complexity(funcs["inner"]) == 2


def quotes_timing(text: str) -> bool:
    return TIMING.search(QUOTED.sub("", text)) is not None


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment of the module at `path`, and of every line of its
    docstrings (the module's, its classes' and its functions')."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                first = node.body[0].lineno
                for n, line in enumerate(doc.splitlines()):
                    yield first + n, line


def test_no_comment_quotes_a_timing() -> None:
    found = [f"{path.relative_to(ROOT).as_posix()}:{line}: {text.strip()}"
             for path in sources() for line, text in prose(path) if quotes_timing(text)]
    assert not found, ("a measured timing in a comment or docstring; say the reason without "
                       "the figure (timings go in tests/bench):\n" + "\n".join(found))


def test_what_counts_as_quoting_a_timing(tmp_path: Path) -> None:
    for measured in ("# takes 40 ms", "3.2 s on this machine", "was 99 → 19 ms",
                     "(0.4 seconds a message)", "about 15ms", "1.5 Minutes to index"):
        assert quotes_timing(measured), measured
    for other in ("# seconds a call may take", 'e.g. "retrying in 5 s"', "12 hex digits",
                  "the Unix time in milliseconds", "10,000 rows", "3 steps", "TOOL_TICK_MS"):
        assert not quotes_timing(other), other
    source = 'def f():\n    """Waits.\n\n    It took 2 s."""\n    return 1  # in 5 ms\n'
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    assert sorted(n for n, text in prose(path) if quotes_timing(text)) == [4, 5]


if __name__ == "__main__":  # the largest functions, for a report
    every = all_shapes()
    for title, key in (("lines", lambda s: s.lines), ("complexity", lambda s: s.complexity)):
        print(f"largest by {title}:")
        for s in sorted(every, key=key, reverse=True)[:10]:
            print(f"  {s.lines:4d} lines  complexity {s.complexity:3d}  {s.name}")
