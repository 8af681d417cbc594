"""PostgreSQL access: pool sizing (pool.py), the engine and its lifecycle (engine.py), the
tables (models.py), the items' queries (items.py) and the 503 for an unreachable database
(errors.py). Depends on SQLAlchemy 2 (asyncio) and asyncpg; migrations live in migrations/.
"""
