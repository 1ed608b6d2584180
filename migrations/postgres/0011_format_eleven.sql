-- Format 11 (ADR 0059) changes SQLite's event chunks only (packed in the client, lz4;
-- migrations/sqlite/0011). PostgreSQL keeps its chunks as text, compressed by the server
-- (lz4 since format 10, ADR 0057): this migration only marks the format, so that a
-- store's format is the same number on both databases.
SELECT 1;
