-- The run store on PostgreSQL, format 4: the schema SQLite reaches with its migrations
-- 0001 to 0004 (migrations/sqlite), made in one step. Same tables, columns and meanings;
-- every number is a BIGINT (sqlx reads them all as i64, as on SQLite), and run ids sort
-- bytewise (`COLLATE "C"`), as ULIDs must for `ORDER BY id` to be creation order.
-- The version is 4, not 1, so that a format number means the same schema on both stores.

CREATE TABLE documents (
    digest   TEXT PRIMARY KEY NOT NULL,
    document TEXT NOT NULL
);

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

CREATE TABLE steps (
    run_id     TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    delta      TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE snapshots (
    run_id    TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       BIGINT NOT NULL,
    run_state TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE dependencies (
    run_id   TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    dep_id   TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX dependencies_dep ON dependencies (dep_id);

-- A checkpoint is one statement, as on SQLite (where it is an insert into a view with an
-- INSTEAD OF trigger): this function fences the write (the run is at the previous
-- checkpoint and `p_owner` holds a current lease; the update's row lock makes the check
-- and the write one step against any other writer), updates the run row, and appends
-- the step row or, when a snapshot comes with it, keeps the snapshot instead as the
-- run's only one and drops the step rows it covers. It returns the run row as it leaves
-- it. A refused checkpoint raises 'pactgraph: checkpoint refused' and writes nothing.
CREATE FUNCTION pactgraph_checkpoint(
    p_run_id TEXT, p_seq BIGINT, p_steps BIGINT, p_status TEXT, p_reason TEXT,
    p_now BIGINT, p_owner TEXT, p_running BOOLEAN, p_next_key TEXT, p_next_attempt BIGINT,
    p_digest TEXT, p_document TEXT, p_delta TEXT, p_snapshot TEXT
) RETURNS SETOF runs LANGUAGE plpgsql AS $$
BEGIN
    IF p_document IS NOT NULL THEN
        INSERT INTO documents (digest, document) VALUES (p_digest, p_document)
            ON CONFLICT (digest) DO NOTHING;
    END IF;
    -- The attempt counter moves to the next step only while the run runs: an ended or
    -- paused run keeps its last step's attempt, which a reopened step continues.
    RETURN QUERY
    UPDATE runs SET
        seq = p_seq,
        steps = p_steps,
        status = p_status,
        termination_reason = p_reason,
        updated_ms = p_now,
        digest = COALESCE(p_digest, digest),
        snapshot_seq = CASE WHEN p_snapshot IS NULL THEN snapshot_seq ELSE p_seq END,
        attempt_key = CASE WHEN p_running THEN p_next_key ELSE attempt_key END,
        attempt = CASE WHEN p_running THEN p_next_attempt ELSE attempt END
     WHERE id = p_run_id AND seq = p_seq - 1 AND owner = p_owner
       AND lease_expires_ms > p_now
    RETURNING runs.*;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pactgraph: checkpoint refused';
    END IF;
    IF p_snapshot IS NULL THEN
        INSERT INTO steps (run_id, seq, delta, created_ms)
            VALUES (p_run_id, p_seq, p_delta, p_now);
    ELSE
        INSERT INTO snapshots (run_id, seq, run_state) VALUES (p_run_id, p_seq, p_snapshot);
        DELETE FROM snapshots WHERE run_id = p_run_id AND seq < p_seq;
        DELETE FROM steps WHERE run_id = p_run_id AND seq < p_seq;
    END IF;
    RETURN;
END;
$$;
