-- Format 12 (ADR 0063) changes PostgreSQL's event chunks only (packed in the client, a
-- BYTEA column of their own; migrations/postgres/0012). SQLite packs its chunks since
-- format 11 (ADR 0059): this migration only marks the format, so that a store's format is
-- the same number on both databases.
SELECT 1;
