-- Format 13 (ADR 0079) moves PostgreSQL's deltas into their checkpoints' event chunks
-- (migrations/postgres/0013). SQLite's checkpoint trigger still writes a step row: its
-- chunks get the same column, never set, so that a load reads the same columns on both
-- databases, and the store's format is the same number on both.
ALTER TABLE event_chunks ADD COLUMN delta TEXT;
