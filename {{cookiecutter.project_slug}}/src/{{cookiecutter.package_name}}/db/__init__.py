"""PostgreSQL access with SQLAlchemy 2 (asyncio) and asyncpg; the schema's migrations/ apart."""
