-- Format 9 on PostgreSQL (ADR 0054): what a checkpoint costs the server.
--
-- 1. A checkpoint's step row and a snapshot are inserted without a foreign key checked
-- row by row. A checkpoint inserts them only `FROM up`, the run row the same statement
-- has just updated under its row lock (store/dialects.rs), so no step row or snapshot
-- can name a missing run; the check (a query through SPI per inserted row, `SELECT 1
-- FROM runs ... FOR KEY SHARE`) cost the server about 36,000 instructions a row. A run's
-- step rows and snapshots still go with it: the `ON DELETE CASCADE` is replaced by a
-- statement-level trigger deleting those of the runs a statement deleted (a prune).
-- Dependencies keep their foreign key (written once, at the run's create).
ALTER TABLE steps DROP CONSTRAINT steps_run_id_fkey;
ALTER TABLE snapshots DROP CONSTRAINT snapshots_run_id_fkey;

-- The tables of the schema this migration runs in, whatever the search path of the
-- session that deletes runs.
CREATE FUNCTION pactgraph_runs_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM steps WHERE run_id IN (SELECT id FROM gone);
    DELETE FROM snapshots WHERE run_id IN (SELECT id FROM gone);
    RETURN NULL;
END;
$$;

CREATE TRIGGER runs_deleted AFTER DELETE ON runs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION pactgraph_runs_deleted();

-- 2. A snapshot (the whole run state, its trace included: hundreds of KB for a long run)
-- is compressed with lz4 instead of pglz, which was a tenth of the server's work in a
-- run checkpointed every step. lz4 needs PostgreSQL 14 built with it; elsewhere the
-- snapshots stay compressed as before.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE snapshots ALTER COLUMN run_state SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'lz4 is not available: snapshots stay compressed with pglz';
END;
$$;
