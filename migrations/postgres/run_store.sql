-- The run store on PostgreSQL, format 14 (ADR 0084): the schema of
-- migrations/sqlite/run_store.sql, with the same tables, columns and meanings. Every
-- number is a BIGINT (sqlx reads them all as i64, as on SQLite), and run ids sort bytewise
-- (`COLLATE "C"`), as ULIDs must for `ORDER BY id` to be creation order. A checkpoint is
-- one statement of data-modifying `WITH` clauses, pactgraph's own (store/dialects.rs): it
-- fences the run row's update and writes the rows below `FROM` the row it updated. The
-- tables are made in the schema the connection's `search_path` names first.

CREATE TABLE documents (
    digest   TEXT PRIMARY KEY NOT NULL,
    document TEXT NOT NULL
);

-- One row per run; the columns are SQLite's (migrations/sqlite/run_store.sql says what
-- each is for).
CREATE TABLE runs (
    id                 TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    name               TEXT,
    workflow           TEXT NOT NULL,
    digest             TEXT NOT NULL REFERENCES documents (digest),
    format             BIGINT NOT NULL,
    workflow_file      TEXT,
    base_dir           TEXT,
    status             TEXT NOT NULL,
    termination_reason TEXT,
    steps              BIGINT NOT NULL,
    seq                BIGINT NOT NULL,
    snapshot_seq       BIGINT NOT NULL,
    created_ms         BIGINT NOT NULL,
    updated_ms         BIGINT NOT NULL,
    expires_ms         BIGINT,
    owner              TEXT,
    lease_expires_ms   BIGINT,
    attempt_key        TEXT,
    attempt            BIGINT NOT NULL DEFAULT 1,
    cancel_requested   BIGINT NOT NULL DEFAULT 0,
    dep_deadline_ms    BIGINT,
    on_dep_failure     TEXT,
    dep_result         TEXT
);

CREATE INDEX runs_name ON runs (name);
CREATE INDEX runs_workflow ON runs (workflow);
CREATE INDEX runs_digest ON runs (digest);
-- What a worker looks for: runs not yet final and not paused.
CREATE INDEX runs_runnable ON runs (id) WHERE status IN ('queued', 'waiting', 'running');

-- Step rows and snapshots have no foreign key (ADR 0054): a checkpoint inserts them only
-- `FROM` the run row the same statement has just updated under its row lock, so none can
-- name a missing run, and a foreign key's check cost the server a query per inserted row.
-- They go with their run by the trigger `runs_deleted` below.

-- Step rows, as on SQLite: a load reads them after the run's snapshot, and a snapshot
-- deletes those it covers. No checkpoint writes one on PostgreSQL: a checkpoint without
-- a snapshot keeps its delta in its event chunk's row (`event_chunks.delta`, ADR 0079).
CREATE TABLE steps (
    run_id     TEXT COLLATE "C" NOT NULL,
    seq        BIGINT NOT NULL,
    delta      TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- A run's only snapshot: its whole state at checkpoint `seq` (hundreds of KB for a long
-- run, its trace included), compressed with lz4 (below) rather than pglz.
CREATE TABLE snapshots (
    run_id    TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL,
    run_state TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- The runs a run waits for, in the order given (written once, at the run's create: it
-- keeps its foreign key).
CREATE TABLE dependencies (
    run_id   TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    dep_id   TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX dependencies_dep ON dependencies (dep_id);

-- A checkpoint's events are one row (ADR 0053): the chunk of run `run_id`'s events
-- `first_seq` to `last_seq` (numbered on by one), written by checkpoint `seq`, and the
-- checkpoint's delta when it has no snapshot (ADR 0079). The events are packed in the
-- client (ADR 0063; store/packed.rs), in `packed`: the texts' length as a little-endian
-- 32-bit integer, then one lz4 block of the events' JSON texts, one a line. `STORAGE
-- EXTERNAL`: a packed chunk is moved out of line when large, never compressed again.
-- `events` (text, compressed with lz4) is what readers take when `packed` is NULL; no
-- write of this format sets it. No foreign key, as for step rows.
CREATE TABLE event_chunks (
    run_id    TEXT COLLATE "C" NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq  BIGINT NOT NULL,
    seq       BIGINT,
    events    TEXT,
    packed    BYTEA,
    delta     TEXT,
    PRIMARY KEY (run_id, first_seq)
);
ALTER TABLE event_chunks ALTER COLUMN packed SET STORAGE EXTERNAL;
-- What a load reads: the chunks of the checkpoints after the run's snapshot.
CREATE INDEX event_chunks_seq ON event_chunks (run_id, seq);

-- lz4 needs PostgreSQL 14 built with it; elsewhere pglz stays.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE snapshots ALTER COLUMN run_state SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE event_chunks ALTER COLUMN events SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'lz4 is not available: snapshots and event chunks stay compressed with pglz';
END;
$$;

-- One mechanism deletes what a deleted run leaves (ADR 0057): a statement-level trigger
-- deleting the step rows, snapshots and event chunks of the runs a statement deleted (a
-- prune). `SET search_path FROM CURRENT`: the tables of the schema this script runs in,
-- whatever the search path of the session that deletes runs.
CREATE FUNCTION pactgraph_runs_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM steps WHERE run_id IN (SELECT id FROM gone);
    DELETE FROM snapshots WHERE run_id IN (SELECT id FROM gone);
    DELETE FROM event_chunks WHERE run_id IN (SELECT id FROM gone);
    RETURN NULL;
END;
$$;

CREATE TRIGGER runs_deleted AFTER DELETE ON runs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION pactgraph_runs_deleted();
