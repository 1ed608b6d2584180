-- Format 9 (ADR 0054) changes PostgreSQL's schema only (its step rows and snapshots
-- without a foreign key checked per row, migrations/postgres/0009). SQLite's schema is
-- unchanged: this migration only marks the format, so that a store's format is the same
-- number on both databases.
SELECT 1;
