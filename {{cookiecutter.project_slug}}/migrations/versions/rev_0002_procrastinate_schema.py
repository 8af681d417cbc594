"""Revision 0002 (2026-11-29): the job queue's tables, types and functions, as procrastinate
3.10.0 released them (src/{{ cookiecutter.package_name }}/jobs/, docs/jobs.md).

procrastinate ships its schema as SQL: this applies the copy in migrations/procrastinate/,
frozen as released. Each library migration after it gets a revision of its own, which names it
in PROCRASTINATE_MIGRATIONS (docs/jobs.md, Upgrading procrastinate); tests/jobs/test_schema.py
fails while the locked library ships one that no revision wraps."""

from pathlib import Path

from alembic import context, op
from sqlalchemy.util import await_only

revision: str = "0002"
down_revision: str | None = "0001"

# The release whose schema.sql this is: every library migration up to it is in it.
PROCRASTINATE_SCHEMA = "3.10.0"
# Library migrations this revision applies one by one (none: the schema holds them all).
PROCRASTINATE_MIGRATIONS: tuple[str, ...] = ()

SCHEMA = Path(__file__).parent.parent / "procrastinate" / f"schema-{PROCRASTINATE_SCHEMA}.sql"
# Everything the schema creates: its functions (with the triggers calling them), then its
# tables (with their indexes), then its types; CASCADE only where its own objects depend.
DROP = """
DO $$
DECLARE routine regprocedure;
BEGIN
    FOR routine IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.proname LIKE 'procrastinate%' AND p.pronamespace = current_schema()::regnamespace
    LOOP
        EXECUTE 'DROP FUNCTION ' || routine || ' CASCADE';
    END LOOP;
END $$;
DROP TABLE procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs,
    procrastinate_workers;
DROP TYPE procrastinate_job_to_defer_v1, procrastinate_job_event_type, procrastinate_job_status;
"""


def execute_script(sql: str) -> None:
    """Run ``sql``, statements with $$-quoted bodies, as one script in the migration's
    transaction: asyncpg's simple query protocol (SQLAlchemy prepares one statement at a
    time). Offline (--sql), printed as it is."""
    if context.is_offline_mode():
        op.execute(sql)
        return
    asyncpg_connection = op.get_bind().connection.driver_connection
    if asyncpg_connection is None:  # SQLAlchemy's for a connection it has closed
        raise RuntimeError("the migration's connection is closed")
    await_only(asyncpg_connection.execute(sql))


def upgrade() -> None:
    execute_script(SCHEMA.read_text(encoding="utf-8"))


def downgrade() -> None:
    execute_script(DROP)
