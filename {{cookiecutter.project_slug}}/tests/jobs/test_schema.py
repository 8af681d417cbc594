"""The job queue's schema stays the project's: every migration the locked procrastinate ships
is applied by one of the project's revisions, and the frozen copy is the library's schema."""

import importlib.resources
import importlib.util
from pathlib import Path
from types import ModuleType

import procrastinate
from packaging.version import Version

from database.tables import MIGRATIONS

VERSIONS = Path(MIGRATIONS.dir) / "versions"


def revision_modules() -> list[ModuleType]:
    """The project's revision files, loaded as modules."""
    modules = []
    for path in sorted(VERSIONS.glob("*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append(module)
    return modules


def library_version(migration: str) -> Version:
    """A library migration's release, from its name (``03.04.00_01_...sql``: 3.4.0)."""
    release = migration.split("_", maxsplit=1)[0]
    return Version(".".join(str(int(part)) for part in release.split(".")))


def test_every_library_migration_is_wrapped_by_a_revision() -> None:
    """A procrastinate upgrade that brings a migration fails here until a revision applies it
    (docs/jobs.md, Upgrading procrastinate)."""
    modules = revision_modules()
    [baseline] = [module for module in modules if hasattr(module, "PROCRASTINATE_SCHEMA")]
    wrapped = {
        name for module in modules for name in getattr(module, "PROCRASTINATE_MIGRATIONS", ())
    }
    shipped = importlib.resources.files("procrastinate") / "sql" / "migrations"
    names = sorted(entry.name for entry in shipped.iterdir() if entry.name.endswith(".sql"))
    assert names, "procrastinate ships its migrations in sql/migrations"
    in_schema = Version(baseline.PROCRASTINATE_SCHEMA)
    missing = [name for name in names if library_version(name) > in_schema and name not in wrapped]
    assert missing == [], "write a revision applying each (docs/jobs.md, Upgrading procrastinate)"


def test_the_frozen_schema_is_the_locked_library_s_when_versions_agree() -> None:
    """At the version the copy was taken from, it is byte for byte the library's schema.sql."""
    [baseline] = [
        module for module in revision_modules() if hasattr(module, "PROCRASTINATE_SCHEMA")
    ]
    library = importlib.resources.files("procrastinate") / "sql" / "schema.sql"
    if Version(procrastinate.__version__) == Version(baseline.PROCRASTINATE_SCHEMA):
        assert baseline.SCHEMA.read_text(encoding="utf-8") == library.read_text(encoding="utf-8")
    else:  # upgraded: the wrapped migrations carry the difference (the test above)
        assert Version(procrastinate.__version__) > Version(baseline.PROCRASTINATE_SCHEMA)
