-- Format 10 on PostgreSQL (ADR 0057): a run's event chunks go the way of its step rows
-- and snapshots, and are compressed with lz4.
--
-- 1. One mechanism deletes what a deleted run leaves: format 9's statement-level trigger
-- on `runs` (migration 0009) deleted the step rows and snapshots of the deleted runs, and
-- `prune` deleted their event chunks with a statement of its own (chunks have had no
-- foreign key since format 8, ADR 0053). The trigger now deletes the chunks too, so a
-- run deleted by any statement takes all of its rows along, and `prune` only deletes
-- runs. `SET search_path FROM CURRENT`: the tables of the schema this migration runs in.
CREATE OR REPLACE FUNCTION pactgraph_runs_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM steps WHERE run_id IN (SELECT id FROM gone);
    DELETE FROM snapshots WHERE run_id IN (SELECT id FROM gone);
    DELETE FROM event_chunks WHERE run_id IN (SELECT id FROM gone);
    RETURN NULL;
END;
$$;

-- 2. A checkpoint's event chunk (its events' texts, one a line: about 420 KB for a batch
-- of 256 steps) is compressed with lz4 instead of pglz, as snapshots are since format 9:
-- pglz compressing the chunks was two thirds of the server's instructions in a run
-- checkpointed at effects (146 M of 221 M for 2,000 steps). Chunks kept before stay as
-- they are (a column's compression applies to values written after the change; both
-- read back the same). lz4 needs PostgreSQL 14 built with it; elsewhere pglz stays.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE event_chunks ALTER COLUMN events SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'lz4 is not available: event chunks stay compressed with pglz';
END;
$$;
