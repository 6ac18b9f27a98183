"""The layers point one way (app -> search -> indexer -> models), only the vector index imports
faiss, and only `app.main` imports the HTTP edge (`app.api`)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)

ROOT = Path(__file__).resolve().parents[1]
# Beside the layers, in `docsim/` itself: the wire's shapes, which the search layer, the app and
# the client share; the client, which imports nothing of the server; and `docsim.local`, the
# client on an in-process service. Each may import only these of ours.
BESIDE_LAYERS = {
    "protocol": {"protocol"},
    "client": {"client", "protocol"},
    "local": {"local", "client", "protocol", "app"},
}


def local(name: str) -> str:
    """A module's name in the repository's folders: `docsim.indexer.api` is `indexer.api` (the
    installed distribution maps the folders under `docsim`), and `docsim.client`, `docsim.local`
    and `docsim.protocol` are `client`, `local` and `protocol` (folders of `docsim/` itself)."""
    for folder in ("app", "search", "indexer", "models", "migrations", *BESIDE_LAYERS):
        if name == f"docsim.{folder}" or name.startswith(f"docsim.{folder}."):
            return name.removeprefix("docsim.")
    return name


def imports(package: str) -> dict[str, set[str]]:
    """`path -> the top-level folders it imports` for every module of `package` (a layer's
    folder, or one of `BESIDE_LAYERS` under `docsim/`)."""
    found: dict[str, set[str]] = {}
    where = ROOT / "docsim" / package if package in BESIDE_LAYERS else ROOT / package
    paths = (
        [where.with_suffix(".py")] if where.with_suffix(".py").is_file() else where.rglob("*.py")
    )
    for path in paths:
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {local(alias.name).split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(local(node.module).split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


LAYERS = ("models", "indexer", "search", "app")  # each imports only those before it


def layer_violations(found: dict[str, dict[str, set[str]]]) -> list[str]:
    """`path -> layer` for every import of a layer above the importing module's own."""
    wrong = []
    for position, layer in enumerate(LAYERS):
        above = set(LAYERS[position + 1 :])
        for path, names in found[layer].items():
            wrong += [f"{path} -> {name}" for name in sorted(names & above)]
    return sorted(wrong)


def test_layers_point_one_way() -> None:
    assert layer_violations({layer: imports(layer) for layer in LAYERS}) == []


def test_the_layer_check_finds_an_upward_import() -> None:
    found = {layer: imports(layer) for layer in LAYERS}
    found["indexer"]["indexer/settings.py"] |= {"search"}
    found["models"]["models/kernels/scoring.py"] |= {"app"}
    assert layer_violations(found) == [
        "indexer/settings.py -> search",
        "models/kernels/scoring.py -> app",
    ]


OURS = {"app", "search", "indexer", "models", "migrations", *BESIDE_LAYERS}


def beside_violations(found: dict[str, dict[str, set[str]]]) -> list[str]:
    """Imports of ours that `BESIDE_LAYERS` does not allow; and a layer's import of the client
    or `docsim.local` (the layers are the server), or of the protocol below the search layer."""
    wrong = []
    for package, paths in found.items():
        allowed = BESIDE_LAYERS.get(package)
        if allowed is None:  # a layer
            allowed = (
                OURS
                - {"client", "local"}
                - ({"protocol"} if package in {"models", "indexer"} else set())
            )
        for path, names in paths.items():
            wrong += [f"{path} -> {name}" for name in sorted((names & OURS) - allowed)]
    return sorted(wrong)


def test_the_protocol_and_the_clients_import_only_what_they_may() -> None:
    found = {package: imports(package) for package in (*LAYERS, *BESIDE_LAYERS)}
    assert len(found["protocol"]) >= 3 and len(found["client"]) >= 3 and len(found["local"]) == 1
    assert beside_violations(found) == []


def test_the_check_beside_the_layers_can_fail() -> None:
    found = {package: imports(package) for package in (*LAYERS, *BESIDE_LAYERS)}
    found["protocol"]["docsim/protocol/answers.py"] |= {"search"}
    found["client"]["docsim/client/calls.py"] |= {"app"}
    found["indexer"]["indexer/settings.py"] |= {"protocol"}
    found["search"]["search/searcher.py"] |= {"client"}
    assert beside_violations(found) == [
        "docsim/client/calls.py -> app",
        "docsim/protocol/answers.py -> search",
        "indexer/settings.py -> protocol",
        "search/searcher.py -> client",
    ]


def test_models_import_no_sql_or_http() -> None:
    for path, names in imports("models").items():
        assert not names & {"sqlalchemy", "fastapi", "alembic", "faiss"}, path


def test_only_vector_index_imports_faiss() -> None:
    users = [
        p
        for pkg in ("models", "indexer", "search", "app", "migrations")
        for p, n in imports(pkg).items()
        if "faiss" in n
    ]
    # the adapter, and the writers of FAISS's file format that a build streams to disk
    assert sorted(users) == ["indexer/store/faiss_files.py", "indexer/store/vector_index.py"]


def test_shard_actors_import_no_sql() -> None:
    """A Ray shard actor's process imports `search.shards.actors`: it holds vectors,
    never a database, so SQLAlchemy and Alembic stay out of it (about 0.2 s and 23 MiB)."""
    code = (
        "import sys, docsim.search.shards.actors; "
        "print(sorted(m for m in ('sqlalchemy', 'alembic', 'fastapi') if m in sys.modules))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def module_graph(packages: tuple[str, ...] = LAYERS) -> dict[str, set[str]]:
    """`module -> modules of ours it imports`, counting imports inside functions too (a lazy
    import that breaks a circle at run time still ties the modules together)."""
    modules = {}
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [local(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                module = local(node.module)
                targets = [module, *(f"{module}.{a.name}" for a in node.names)]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in graph[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return circles


def test_no_module_imports_itself_through_others() -> None:
    assert import_circles(module_graph()) == []


def test_the_circle_check_finds_a_circle() -> None:
    """The check above can fail: a reversed import (registry -> loading) makes a circle."""
    graph = module_graph()
    registry, loading = "models.encoders.registry", "models.encoders.loading"
    graph[registry] = graph[registry] | {loading}
    circles = import_circles(graph)
    assert any({loading, registry} <= set(c) for c in circles), circles


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def api_importers(graph: dict[str, set[str]]) -> set[str]:
    """The modules outside `app.api` that import `app.api` or a module in it."""
    return {
        module
        for module, targets in graph.items()
        if not within(module, "app.api") and any(within(t, "app.api") for t in targets)
    }


def package_graph(graph: dict[str, set[str]], depth: int = 2) -> dict[str, set[str]]:
    """`graph` with each module folded into its package `depth` names deep (`app.services`)."""

    def fold(module: str) -> str:
        return ".".join(module.split(".")[:depth])

    packages: dict[str, set[str]] = {fold(module): set() for module in graph}
    for module, targets in graph.items():
        packages[fold(module)] |= {fold(t) for t in targets} - {fold(module)}
    return packages


def test_services_core_render_and_schemas_do_not_import_the_api() -> None:
    lower = ("app.services", "app.core", "app.render", "app.schemas")
    importers = api_importers(module_graph())
    assert {m for m in importers if any(within(m, package) for package in lower)} == set()


def test_only_app_main_imports_the_api() -> None:
    assert api_importers(module_graph()) == {"app.main"}


def test_app_packages_import_each_other_without_a_circle() -> None:
    """Services and routes share `app.schemas`; neither package reaches back into the other."""
    assert import_circles(package_graph(module_graph())) == []


def test_the_api_check_finds_a_reversed_import() -> None:
    """The checks above can fail: a service importing a route is reported, and it makes a
    circle between `app.api` and `app.services`."""
    graph = module_graph()
    graph["app.services.similar"] = graph["app.services.similar"] | {"app.api.routes.similar"}
    assert api_importers(graph) == {"app.main", "app.services.similar"}
    circles = import_circles(package_graph(graph))
    assert any({"app.api", "app.services"} <= set(c) for c in circles), circles


def test_the_command_line_starts_without_torch_or_the_pipeline() -> None:
    """`docsim --help` imports the command modules and the settings only: the work's modules
    load with the command that needs them (`indexer.api` is lazy, each command imports its
    own)."""
    code = (
        "import sys; from typer.testing import CliRunner; from docsim.app.cli import docsim; "
        "result = CliRunner().invoke(docsim(), ['--help']); assert result.exit_code == 0; "
        "heavy = {'torch', 'faiss', 'nltk', 'sqlalchemy', 'docsim.indexer.builder.pipeline'}; "
        "assert not heavy & set(sys.modules), heavy & set(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


SURFACES = ("indexer.api", "search.api")


def surface_imports(surface: str) -> dict[str, str]:
    """`name -> module` of every import of the surface `indexer.api` or `search.api`."""
    path = ROOT / Path(*surface.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__"
        for alias in node.names
    }


@pytest.mark.parametrize("surface", SURFACES)
def test_the_surface_exports_what_it_imports(surface: str) -> None:
    """`indexer.api` and `search.api` are plain imports (no table of names to keep in step),
    and `__all__` lists exactly them."""
    api = importlib.import_module(f"docsim.{surface}")
    imported = surface_imports(surface)
    # the walk found the surface's imports (search.api has 19 since the request's options and
    # the filter's tree moved to `docsim.protocol`, which the app imports directly)
    assert len(imported) >= 15
    assert sorted(api.__all__) == sorted(imported)


def test_loading_an_encoder_does_not_import_training() -> None:
    """Nothing of the training room (the loop, its data, losses or early stopping) loads with
    an encoder: the package itself is in `sys.modules` as soon as any module of it is."""
    code = (
        "import sys, docsim.models.encoders.loading; "
        "assert 'docsim.models.training' not in sys.modules, 'models.training was imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


# Which rooms each room may import: within the indexer, text <- store <- builder <- jobs <- cli;
# `settings`, `logs`, `ray_session` and `train` are shared top-level modules, and every room
# may read the named choices and the errors (`indexer.choices`, `indexer.errors`: leaves). The
# search layer, one room, reads the indexer's store and text (never the builder or the jobs),
# its settings, and the command-line helpers of its `evaluate` command.
LEAVES = {"indexer.choices", "indexer.errors"}
ROOMS = {
    "indexer.text": LEAVES,
    "indexer.store": LEAVES | {"indexer.text"},
    "indexer.builder": LEAVES
    | {
        "indexer.settings",
        "indexer.ray_session",
        "indexer.store",
        "indexer.text",
    },
    "indexer.jobs": LEAVES
    | {
        "indexer.builder",
        "indexer.settings",
        "indexer.store",
        "indexer.text",
    },
    "search": LEAVES
    | {
        "indexer.cli.common",
        "indexer.ray_session",
        "indexer.settings",
        "indexer.store",
        "indexer.text",
    },
}


def room(module: str) -> str:
    """`indexer.store.db` -> `indexer.store`, `search.sdr_scorer` -> `search`; other modules
    are their own room."""
    parts = module.split(".")
    if parts[0] == "search":
        return "search"
    return ".".join(parts[:2]) if parts[0] == "indexer" and len(parts) > 2 else module


def room_violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in graph.items():
        allowed = ROOMS.get(room(module))
        if allowed is None:
            continue
        for target in targets:
            if not target.startswith("indexer") or room(target) == room(module):
                continue
            if room(target) not in allowed and target not in allowed:
                found.append(f"{module} -> {target}")
    return sorted(found)


def test_rooms_point_one_way() -> None:
    """Search never imports the builder or the jobs (nor they search: the layer test); text
    and store stand alone."""
    graph = module_graph()
    assert set(ROOMS) <= {room(m) for m in graph}
    assert room_violations(graph) == []


def test_the_room_check_finds_a_reversed_import() -> None:
    graph = module_graph()
    graph["search.searcher"] = graph["search.searcher"] | {"indexer.builder.pipeline"}
    graph["indexer.store.db"] = graph["indexer.store.db"] | {"indexer.jobs.queue"}
    assert room_violations(graph) == [
        "indexer.store.db -> indexer.jobs.queue",
        "search.searcher -> indexer.builder.pipeline",
    ]


# What `app` may import of the layers below: their surfaces, and the errors it maps to HTTP
# codes. The command line (`app.cli`) extends the indexer's: it takes it from `indexer.cli`,
# whose modules import nothing heavy at start-up (the surfaces load the whole layers), and
# adds the search layer's `evaluate`.
APP_SURFACE = {"indexer.api", "indexer.errors", "search.api", "search.errors"}
CLI_SURFACE = {"indexer.cli.common", "indexer.cli.main", "search.cli"}


def surface_violations(graph: dict[str, set[str]]) -> list[str]:
    """`app` imports of a module below other than the surfaces, and modules below that import
    a surface (it is the app's door, not a shortcut inside the layers)."""
    found = []
    for module, targets in graph.items():
        allowed = APP_SURFACE | (CLI_SURFACE if module == "app.cli" else set())
        for target in targets:
            below = within(target, "indexer") or within(target, "search")
            if within(module, "app") and below and target not in allowed:
                found.append(f"{module} -> {target}")
            if not within(module, "app") and target in {"indexer.api", "search.api"}:
                found.append(f"{module} -> {target}")
    return sorted(found)


def test_app_reaches_the_layers_below_through_their_surfaces_only() -> None:
    assert surface_violations(module_graph()) == []


def test_the_surface_check_finds_an_internal_import() -> None:
    """The check above can fail: a service importing the searcher's module is reported, as
    is an indexer module importing the surface."""
    graph = module_graph()
    graph["app.services.similar"] = graph["app.services.similar"] | {"search.searcher"}
    graph["search.sdr_scorer"] = graph["search.sdr_scorer"] | {"indexer.api"}
    assert surface_violations(graph) == [
        "app.services.similar -> search.searcher",
        "search.sdr_scorer -> indexer.api",
    ]


@pytest.mark.parametrize("surface", SURFACES)
def test_the_surface_names_what_it_exports(surface: str) -> None:
    """Every name a surface lists in `__all__` exists there."""
    api = importlib.import_module(f"docsim.{surface}")
    assert [name for name in api.__all__ if not hasattr(api, name)] == []


def defined_names(path: Path) -> set[str]:
    """The names a module defines itself (classes, functions, assignments), not imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_name_points_at_the_module_that_defines_it(surface: str) -> None:
    """A surface imports each name from its home, not from a module that re-exports it
    (the entry would break when that module stops importing it)."""
    wrong = []
    for name, module in surface_imports(surface).items():
        path = ROOT / Path(*module.removeprefix("docsim.").split(".")).with_suffix(".py")
        if not path.is_file():  # `docsim.protocol.*`: a folder of `docsim/` itself
            path = ROOT / Path(*module.split(".")).with_suffix(".py")
        if name not in defined_names(path):
            wrong.append(f"{name} is not defined in {module}")
    assert wrong == []


def test_the_errors_are_leaves_and_one_table_holds_them_all() -> None:
    """Each layer's leaf of errors (`models.errors`, `indexer.errors`, `search.errors`) loads
    nothing else of ours (beyond the packages' own `__init__` and the leaves below it) and
    nothing heavy; every error class docsim defines for a caller is a `DocsimError`, and is
    in exactly one of the app's `STATUS` (its HTTP status) and `SERVER_FAULTS` (a 500)."""
    leaves = {
        "docsim.models.errors": {"docsim.models.errors"},
        "docsim.indexer.errors": {"docsim.indexer.errors", "docsim.models.errors"},
        "docsim.search.errors": {"docsim.search.errors", "docsim.models.errors"},
    }
    for leaf, allowed in leaves.items():
        package = leaf.rsplit(".", 1)[0]
        code = (
            f"import sys, docsim.models, {package}; before = set(sys.modules); import {leaf}; "
            "heavy = {'torch', 'faiss', 'nltk', 'sqlalchemy', 'fastapi', 'numpy'}; "
            "ours = {m for m in set(sys.modules) - before if m.startswith('docsim.')}; "
            "assert not heavy & set(sys.modules), heavy & set(sys.modules); "
            f"assert ours <= {allowed!r}, ours"
        )
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    import docsim.app.core.errors as app_errors
    import docsim.indexer.errors as indexer_errors
    import docsim.models.errors as model_errors
    import docsim.search.errors as search_errors
    from docsim.models.errors import DocsimError

    defined = [
        value
        for module in (model_errors, indexer_errors, search_errors, app_errors)
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Exception)
        and value.__module__ == module.__name__
        and value is not DocsimError
    ]
    assert len(defined) > 40
    assert [e for e in defined if not issubclass(e, DocsimError)] == []
    tabled = set(app_errors.STATUS) | app_errors.SERVER_FAULTS
    assert [e for e in defined if e not in tabled] == []
    assert set(app_errors.STATUS).isdisjoint(app_errors.SERVER_FAULTS)


def test_every_import_names_the_one_installed_package() -> None:
    """The folders are installed only as `docsim`'s subpackages: an import of `indexer` or
    `app` by its bare name would work from the repository's root and nowhere else (and load
    a second copy of the module beside `docsim.indexer`'s)."""
    bare = []
    for folder in (
        "app",
        "search",
        "indexer",
        "models",
        "migrations",
        "tests",
        "benchmarks",
        "docs",
    ):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                else:
                    continue
                bare += [
                    f"{path.relative_to(ROOT)}: {name}"
                    for name in names
                    if name.split(".")[0] in {"app", "indexer", "models", "migrations"}
                ]
    assert bare == []
    installed = (ROOT / "docsim").iterdir()
    links = {p.name: p.readlink() for p in installed if p.is_symlink()}
    layers = ("app", "search", "indexer", "models", "migrations")
    assert links == {name: Path("..") / name for name in layers}


def test_the_protocol_imports_nothing_of_the_server() -> None:
    """`docsim.protocol` (the wire's shapes, which the client reads answers into) loads
    pydantic and nothing of the service's layers or their heavy packages."""
    code = (
        "import sys, docsim.protocol.answers, docsim.protocol.explanations; "
        "loaded = {m.split('.')[1] for m in sys.modules if m.startswith('docsim.')}; "
        "assert loaded == {'protocol'}, loaded; "
        "heavy = {'torch', 'numpy', 'fastapi', 'sqlalchemy', 'faiss'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_every_json_answer_of_the_service_is_a_protocol_model() -> None:
    """The routes declare their answers with the models the client reads them into: one
    definition of each shape."""
    from fastapi.routing import APIRoute

    from docsim.app.api.routes import collections, documents, explain, health, jobs, similar

    models = [
        route.response_model
        for module in (collections, documents, explain, health, jobs, similar)
        for route in module.router.routes
        if isinstance(route, APIRoute) and route.response_model is not None
    ]
    assert len(models) >= 15
    assert {m.__module__ for m in models} == {
        "docsim.protocol.answers",
        "docsim.protocol.explanations",
    }


def test_the_tests_mirror_the_code_folders() -> None:
    """Every folder of tests under a layer names a folder of that layer's code
    (`tests/search/lexical/` tests `search/lexical/`), and the nested rooms of the search layer
    and the models have theirs."""
    strays = [
        str(folder.relative_to(ROOT))
        for layer in LAYERS
        for folder in (ROOT / "tests" / layer).rglob("*")
        if folder.is_dir()
        and folder.name != "__pycache__"
        and not (ROOT / folder.relative_to(ROOT / "tests")).is_dir()
    ]
    assert strays == []
    rooms = ["search/lexical", "search/served", "search/shards", "search/evaluation"]
    rooms += ["models/encoders", "models/inference", "models/training", "models/kernels"]
    assert [room for room in rooms if not list((ROOT / "tests" / room).glob("test_*.py"))] == []
