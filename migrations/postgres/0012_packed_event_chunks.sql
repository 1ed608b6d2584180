-- Format 12 on PostgreSQL (ADR 0063): a checkpoint's event chunk is packed in the client,
-- as SQLite's are since format 11 (ADR 0059): the texts' length as a little-endian 32-bit
-- integer, then one lz4 block of them (store/packed.rs), bound as bytes and kept in the
-- new column `packed`. The server no longer checks the texts as UTF-8 (`textrecv`) nor
-- compresses them (lz4 in TOAST, format 10): about 15 M of the 35 M instructions a
-- 2,000-step run cost the backend (ADR 0060). `STORAGE EXTERNAL`: a packed chunk is moved
-- out of line when large, never compressed again.
--
-- No row is rewritten: the column is added empty (a catalog change), and the chunks kept
-- before stay text in `events`, which may now be NULL. A chunk holds its events in one
-- of the two columns: `events` (text, formats 8 to 11) or `packed` (format 12); readers
-- select both and take the one set, so every chunk reads back the same texts, byte for
-- byte, whichever format wrote it. The format number moves so that a pactgraph of format
-- 11, which reads `events` only, refuses the store instead of missing the new chunks.
ALTER TABLE event_chunks ADD COLUMN IF NOT EXISTS packed BYTEA;
ALTER TABLE event_chunks ALTER COLUMN packed SET STORAGE EXTERNAL;
ALTER TABLE event_chunks ALTER COLUMN events DROP NOT NULL;
