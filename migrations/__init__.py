"""Alembic migrations for docsim's tables (metadata in `indexer.store.tables`)."""
