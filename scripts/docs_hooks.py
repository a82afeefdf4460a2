"""MkDocs hooks of the documentation site (``mkdocs.yml`` names this file under ``hooks:``).

What they add to a plain mkdocs-material + mkdocstrings build:

- The API reference is generated from the package tree: one page per module that defines ``__all__`` (the public
  API is defined once, by ``__all__``), under ``api/``, with its nav. The install maps top-level folders into the
  package (``envs/`` ships as ``agentgspo.envs``, ``sandboxes/`` as ``agentgspo.sandboxes``: pyproject.toml's
  ``package-dir``), which griffe cannot see from the source tree, so the hooks lay out the package as it installs,
  as symlinks under ``build/docs-src/``, and point mkdocstrings there.
- Links that README.md makes to ``docs/X.md`` (the README's text is included into pages, never copied) resolve in
  the site: a Markdown preprocessor running after pymdownx.snippets turns ``](docs/X)`` into ``](/X)``, which
  MkDocs resolves from the docs root and validates (``validation.links.absolute_links: relative_to_docs``).
- Math (``$...$`` and ``$$...$$``, parsed by pymdownx.arithmatex) becomes MathML at build time (latex2mathml), so
  the pages need no script and fetch nothing.
- :class:`SphinxRoles`, a griffe extension, turns the library's Sphinx-style docstring markup into Markdown:
  ``:func:`x.y``` roles become cross-references when ``x.y`` is documented (plain code otherwise) and
  reStructuredText simple tables become Markdown tables.

``agentgspo docs`` builds the site (``agentgspo/commands/docs.py``); docs/index.md says how to browse it.
"""

from __future__ import annotations

import ast
import html
import os
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the docs extra installs tomli
    import tomli as tomllib
from pathlib import Path
from typing import Any

import griffe
import markdown
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
SOURCE_TREE = ROOT / "build" / "docs-src"  # the package as it installs, as symlinks (gitignored build/)
API_DIR = "api"

__all__ = [
    "SphinxRoles",
    "on_config",
    "on_files",
    "on_page_content",
    "package_dirs",
    "canonical_homes",
    "public_modules",
]


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Package name -> its folder in the repository: the top-level package and every ``package-dir`` mapping of
    pyproject.toml (``agentgspo.envs`` -> ``envs/``, ...)."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: root / folder for name, folder in setuptools.get("package-dir", {}).items()}


def _lay_out_source_tree(root: Path = ROOT, dest: Path = SOURCE_TREE) -> Path:
    """``dest/agentgspo/...`` as the package installs: the entries of ``agentgspo/`` and each mapped subpackage,
    as symlinks (rebuilt on every build, so a new file or mapping is never missed)."""
    dirs = package_dirs(root)
    top = dest / "agentgspo"
    top.mkdir(parents=True, exist_ok=True)
    wanted = {entry.name: entry for entry in dirs["agentgspo"].iterdir() if entry.name != "__pycache__"}
    for name, folder in dirs.items():
        if name != "agentgspo" and name.count(".") == 1:
            wanted[name.split(".", 1)[1]] = folder
    for stale in top.iterdir():
        if stale.name not in wanted or stale.resolve() != wanted[stale.name].resolve():
            stale.unlink()
    for name, target in wanted.items():
        if not (top / name).is_symlink():
            try:
                (top / name).symlink_to(target)
            except FileExistsError:  # another build laid it out at the same moment
                pass
    return dest


def _module_all(path: Path) -> list[str] | None:
    """The names of a module's literal ``__all__``, or ``None`` when it defines none."""
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                value = ast.literal_eval(node.value)
                if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"{path}: __all__ must be a literal list of names, got {value!r}")
                return list(value)
    return None


def _module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the installed package: dotted name -> source file (``envs/x.py`` is ``agentgspo.envs.x``)."""
    found: dict[str, Path] = {}
    for package, folder in package_dirs(root).items():
        for path in sorted(folder.rglob("*.py")):
            if path.parent != folder and not (path.parent / "__init__.py").exists():
                continue
            parts = path.relative_to(folder).with_suffix("").parts
            found.setdefault(".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts))), path)
    return found


def public_modules(root: Path = ROOT) -> dict[str, tuple[Path, list[str], str]]:
    """Every public module of the installed package, sorted: dotted name -> (source file, its ``__all__``, the
    first line of its docstring). A module is public when it defines ``__all__`` and no part of its name starts
    with an underscore; ``agentgspo.commands`` (the CLI, documented by its ``--help``) is left out."""
    found: dict[str, tuple[Path, list[str], str]] = {}
    for name, path in _module_files(root).items():
        if any(part.startswith("_") for part in name.split(".")) or name.startswith("agentgspo.commands"):
            continue
        names = _module_all(path)
        if names is not None:
            docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
            found[name] = (path, names, docstring.strip().split("\n")[0])
    return dict(sorted(found.items()))


def _defined_and_imported(name: str, path: Path) -> tuple[set[str], dict[str, str]]:
    """The names a module defines at top level, and those it imports: name -> absolute module imported from."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    defined: set[str] = set()
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            imported |= {alias.asname or alias.name: source for alias in node.names}
    return defined, imported


def canonical_homes(modules: dict[str, tuple[Path, list[str], str]], root: Path = ROOT) -> dict[str, dict[str, str]]:
    """For each public module, the names of its ``__all__`` documented on another module's page: name -> that
    module, the last one along the chain of imports that is public and lists the name. A name is documented once,
    where it is defined (or the deepest public module re-exporting it); a package page links there."""
    files = _module_files(root)
    homes: dict[str, dict[str, str]] = {}
    for module, (path, names, _summary) in modules.items():
        homes[module] = {}
        for name in names:
            current, home, seen = module, module, set()
            while current in files and current not in seen:
                seen.add(current)
                defined, imported = _defined_and_imported(current, files[current])
                if current != module and current in modules and name in modules[current][1]:
                    home = current
                if name in defined or name not in imported:
                    break
                current = imported[name]
            if home != module:
                homes[module][name] = home
    return homes


def _module_page(name: str, names: list[str], homes: dict[str, str]) -> str:
    """An API page: the module's docstring and the members of its ``__all__`` defined here; the names it
    re-exports are linked to the page that documents them."""
    here = [n for n in names if n not in homes]
    members = "[" + ", ".join(here) + "]" if here else "false"
    page = f"# `{name}`\n\n::: {name}\n    options:\n      members: {members}\n"
    if homes:
        page += "\n## Re-exported here\n\n| name | documented in |\n| --- | --- |\n"
        page += "".join(f"| [`{n}`][{home}.{n}] | `{home}` |\n" for n, home in homes.items())
    return page


def _api_page(name: str) -> str:
    return f"{API_DIR}/{name}.md"


def _api_index(modules: dict[str, tuple[Path, list[str], str]]) -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings at build time: one page per module that defines `__all__` (the public API is",
        "defined there and nowhere else). Modules without `__all__` are internal. `envs/` and `sandboxes/` install",
        "as `agentgspo.envs` and `agentgspo.sandboxes`; the command line is documented by `agentgspo COMMAND --help`",
        "and the [commands table](../commands.md).",
        "",
        "| module | what it is |",
        "| --- | --- |",
    ]
    for name, (_path, _names, summary) in modules.items():
        lines.append(f"| [`{name}`]({name}.md) | {summary.replace('|', '&#124;')} |")
    return "\n".join(lines) + "\n"


def _api_nav(modules: dict[str, tuple[Path, list[str], str]]) -> list[Any]:
    """The reference's nav: the index, then the modules grouped by the package's second level (its wings)."""
    groups: dict[str, list[Any]] = {}
    for name in modules:
        parts = name.split(".")
        group = parts[1] if len(parts) > 1 else "agentgspo"
        groups.setdefault(group, []).append({name: _api_page(name)})
    return [f"{API_DIR}/index.md", *({group: pages} for group, pages in groups.items())]


@event_priority(100)  # before mkdocstrings' own on_config, which drops search paths that do not exist yet
def on_config(config: Any) -> Any:
    """Lay out the installed package for griffe, check mkdocstrings looks there, add the API nav and the link
    rewriter."""
    source = _lay_out_source_tree()
    paths = config.plugins["mkdocstrings"].config.handlers["python"].get("paths", [])
    if [Path(config.config_file_path).parent / p for p in paths] != [source]:
        raise ValueError(f"mkdocs.yml: mkdocstrings' python handler needs paths: [{source.relative_to(ROOT)}]")
    modules = public_modules()
    for entry in config.nav or []:
        if isinstance(entry, dict) and "API reference" in entry:
            entry["API reference"] = _api_nav(modules)
            break
    else:
        raise ValueError("mkdocs.yml: the nav needs an 'API reference' entry (the hooks fill it in)")
    config.markdown_extensions.append(_ReadmeLinks())
    config["_agentgspo_modules"] = modules
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add the generated API pages (one per public module, and the index) to the site's files."""
    from mkdocs.structure.files import File

    modules = config["_agentgspo_modules"]
    homes = canonical_homes(modules)
    files.append(File.generated(config, f"{API_DIR}/index.md", content=_api_index(modules)))
    for name, (_path, names, _summary) in modules.items():
        files.append(File.generated(config, _api_page(name), content=_module_page(name, names, homes[name])))
    return files


class _ReadmeLinkPreprocessor(markdown.preprocessors.Preprocessor):
    """``](docs/X)`` -> ``](/X)``: README.md's links, as included into a page, resolved from the docs root."""

    PATTERN = re.compile(r"\]\(docs/")

    def run(self, lines: list[str]) -> list[str]:
        return [self.PATTERN.sub("](/", line) for line in lines]


class _ReadmeLinks(markdown.Extension):
    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 -- Python-Markdown's name
        md.preprocessors.register(_ReadmeLinkPreprocessor(md), "agentgspo_readme_links", 31)  # after snippets (32)


_MATH = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<block>.*?)\\\])</(?P=tag)>', re.S
)


def on_page_content(html_text: str, page: Any, config: Any, files: Any) -> str:
    """Math as MathML, rendered at build time (no script, nothing fetched)."""
    from latex2mathml.converter import convert

    def mathml(match: re.Match) -> str:
        block = match.group("block") is not None
        source = html.unescape(match.group("block") if block else match.group("inline"))
        return convert(source.strip(), display="block" if block else "inline")

    return _MATH.sub(mathml, html_text)


_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|obj|exc|const):`(?P<tilde>~?)(?P<target>[^`]+)`")
_TABLE_RULE = re.compile(r"^(?P<indent> *)=+( +=+)+ *$")


def _roles_to_markdown(text: str) -> str:
    """``:func:`~a.b.c``` -> an optional cross-reference to ``a.b.c`` titled ``c`` (plain code where ``a.b.c`` is
    not documented: autorefs drops an optional link it cannot resolve)."""

    def replace(match: re.Match) -> str:
        target = match.group("target").strip()
        title = target.rsplit(".", 1)[-1] if match.group("tilde") else target
        title = html.escape(title.removesuffix("()"))
        return f'<autoref identifier="{html.escape(target)}" optional><code>{title}</code></autoref>'

    return _ROLE.sub(replace, text)


def _rst_tables_to_markdown(text: str) -> str:
    """reStructuredText simple tables without a header (a ``===  ===`` rule, rows, the same rule) -> Markdown tables
    (with an empty header row); a row whose first column is empty continues the row above it."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        rule = _TABLE_RULE.match(lines[i])
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == lines[i].strip()), None)
        if not rule or end is None:
            out.append(lines[i])
            i += 1
            continue
        spans = [m.span() for m in re.finditer(r"=+", lines[i])]
        rows: list[list[str]] = []
        for line in lines[i + 1 : end]:
            cells = [
                line[start : spans[k + 1][0] if k + 1 < len(spans) else None].strip()
                for k, (start, _) in enumerate(spans)
            ]
            if rows and not cells[0]:
                rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells)]
            elif any(cells):
                rows.append(cells)
        indent = rule.group("indent")
        out.append(indent + "|" + "  |" * len(spans))  # a simple table without a header row: an empty one
        out.append(indent + "|" + " --- |" * len(spans))
        out += [indent + "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
        i = end + 1
    return "\n".join(out)


_GROUPED_ARG = re.compile(r"^(?P<indent> +)(?P<names>\w+(?:, \w+)+): (?P<text>.*)$")


def _split_grouped_args(text: str) -> str:
    """``a, b, c: text`` in an ``Args:`` section -> one entry per name with the same text (and continuation lines),
    so griffe checks every name against the signature."""
    lines = text.split("\n")
    out: list[str] = []
    in_args = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
        elif line.strip() and not line.startswith(" "):
            in_args = False
        match = _GROUPED_ARG.match(line) if in_args else None
        if not match:
            out.append(line)
            i += 1
            continue
        indent = match.group("indent")
        more = []
        i += 1
        while i < len(lines) and lines[i].startswith(indent + " "):
            more.append(lines[i])
            i += 1
        for name in match.group("names").split(", "):
            out += [f"{indent}{name}: {match.group('text')}", *more]
    return "\n".join(out)


def _doctests_to_fences(text: str) -> str:
    """Doctest blocks (``>>>`` lines and their output, up to a blank line) -> fenced ``pycon`` code, which Markdown
    would otherwise read as nested block quotes."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        if not stripped.startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(stripped)]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


# Google-style section titles griffe parses (a blank line after one would end the section).
_SECTION = re.compile(
    r"^\s*(Args|Arguments|Params|Parameters|Keyword Args|Keyword Arguments|Other Parameters|Raises|Exceptions|"
    r"Returns|Yields|Receives|Examples?|Attributes|Functions|Methods|Classes|Modules|Warns|Warnings|Notes?|"
    r"Deprecated|Type Aliases):\s*$"
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _plain_text_blocks(text: str) -> str:
    """Blank lines where plain-text docstrings rely on layout that Markdown needs marked: before a ``- `` list that
    follows a paragraph line, and around a block indented under a line ending in ``:`` (launch commands, formulas),
    which then renders as code instead of running into the paragraph."""
    lines = text.split("\n")
    out: list[str] = []
    block_indent = None  # the indentation of the current code block, while inside one
    for line in lines:
        previous = out[-1] if out else ""
        if block_indent is not None and line.strip() and _indent(line) < block_indent:
            out.append("")  # the block ends: a paragraph follows
            block_indent = None
        elif block_indent is None and previous.strip() and line.strip():
            deeper = _indent(line) >= _indent(previous) + 4
            if deeper and previous.rstrip().endswith(":") and not _SECTION.match(previous):
                out.append("")
                block_indent = _indent(previous) + 4
            elif (
                line.lstrip().startswith("- ")
                and _indent(line) == _indent(previous)
                and not previous.lstrip().startswith("- ")
                and not _SECTION.match(previous)
            ):
                out.append("")
        out.append(line)
    return "\n".join(out)


class SphinxRoles(griffe.Extension):
    """Griffe extension: the library's Sphinx-style docstring markup as Markdown (roles, simple tables, doctest
    blocks, lists and indented blocks under a paragraph) and ``a, b: text`` argument entries as one entry per
    name."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring before mkdocstrings parses it."""
        if obj.docstring is not None:
            text = _roles_to_markdown(obj.docstring.value)
            text = _split_grouped_args(_rst_tables_to_markdown(text))
            obj.docstring.value = _doctests_to_fences(_plain_text_blocks(text))


if os.environ.get("AGENTGSPO_DOCS_DEBUG"):  # pragma: no cover -- a look at what the hooks see
    print(*public_modules(), sep="\n")
