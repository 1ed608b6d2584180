-- The run store on SQLite, format 14 (ADR 0084): documents once per digest, one row per
-- run, one row per committed step (its delta), the latest snapshot of each run's whole
-- state, the runs each run waits for, and the runs' events in chunks. A checkpoint is one
-- statement: an insert into the view `checkpoint_events_in`, whose triggers write it all.
-- Plain SQL types (TEXT, INTEGER); migrations/postgres/run_store.sql is the same schema.

CREATE TABLE documents (
    digest   TEXT PRIMARY KEY NOT NULL,
    document TEXT NOT NULL
);

-- One row per run. `attempt_key` and `attempt`: which step the run's next (or in-flight)
-- effects belong to (`STEPS.TRACE_LEN` of the run the step starts from) and the attempt
-- they make; `cancel_requested`: a cancel asked of a running run (its driver stops at its
-- next step). A run created `--after` other runs (issue 17) is `waiting` until each is
-- final: until `dep_deadline_ms`, doing `on_dep_failure` when one fails, their results
-- given to the slice `dep_result`.
CREATE TABLE runs (
    id                 TEXT PRIMARY KEY NOT NULL,
    name               TEXT,
    workflow           TEXT NOT NULL,
    digest             TEXT NOT NULL REFERENCES documents (digest),
    format             INTEGER NOT NULL,
    workflow_file      TEXT,
    base_dir           TEXT,
    status             TEXT NOT NULL,
    termination_reason TEXT,
    steps              INTEGER NOT NULL,
    seq                INTEGER NOT NULL,
    snapshot_seq       INTEGER NOT NULL,
    created_ms         INTEGER NOT NULL,
    updated_ms         INTEGER NOT NULL,
    expires_ms         INTEGER,
    owner              TEXT,
    lease_expires_ms   INTEGER,
    attempt_key        TEXT,
    attempt            INTEGER NOT NULL DEFAULT 1,
    cancel_requested   INTEGER NOT NULL DEFAULT 0,
    dep_deadline_ms    INTEGER,
    on_dep_failure     TEXT,
    dep_result         TEXT
);

CREATE INDEX runs_name ON runs (name);
CREATE INDEX runs_workflow ON runs (workflow);
CREATE INDEX runs_digest ON runs (digest);
-- What a worker looks for: runs not yet final and not paused. A partial index: a row is
-- in it while its status is one of these.
CREATE INDEX runs_runnable ON runs (id) WHERE status IN ('queued', 'waiting', 'running');

-- A checkpoint without a snapshot: its delta.
CREATE TABLE steps (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    delta      TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- A run's only snapshot: its whole state at checkpoint `seq`.
CREATE TABLE snapshots (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    run_state TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- The runs a run waits for, in the order given.
CREATE TABLE dependencies (
    run_id   TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    dep_id   TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX dependencies_dep ON dependencies (dep_id);

-- A checkpoint's events are one row (ADR 0053): the chunk of run `run_id`'s events
-- `first_seq` to `last_seq` (numbered on by one), written by checkpoint `seq`. `events` is
-- a BLOB value (SQLite types values, not columns): the texts' length as a little-endian
-- 32-bit integer, then one lz4 block of the events' JSON texts, one a line (packed in the
-- client, ADR 0059; store/packed.rs). The trace items a checkpoint appends are kept once,
-- in its `step` events: its delta says how many (`trace_in_events`), and a load reads
-- them from the chunk of the same `seq`. `delta` is never set on SQLite (its checkpoint
-- writes a step row): the column is there so that a load reads the same columns on both
-- databases. A rowid table: a chunk can weigh hundreds of KB, which a `WITHOUT ROWID`
-- table keeps poorly.
CREATE TABLE event_chunks (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    first_seq INTEGER NOT NULL,
    last_seq  INTEGER NOT NULL,
    seq       INTEGER,
    events    TEXT NOT NULL,
    delta     TEXT,
    PRIMARY KEY (run_id, first_seq)
);
-- What a load reads: the chunks of the checkpoints after the run's snapshot.
CREATE INDEX event_chunks_seq ON event_chunks (run_id, seq);

-- A checkpoint: an insert into `checkpoint_in`, whose trigger fences the write (the run
-- is at the previous checkpoint, and `owner` holds a current lease), updates the run row,
-- and appends the step row or, when a snapshot comes with it, keeps the snapshot instead,
-- as the run's only one, and drops the step rows it covers.
CREATE VIEW checkpoint_in (
    run_id, seq, steps, status, termination_reason, now_ms, owner, running,
    next_key, next_attempt, digest, document, delta, snapshot
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL;

CREATE TRIGGER checkpoint_in_insert INSTEAD OF INSERT ON checkpoint_in
BEGIN
    SELECT RAISE(ABORT, 'pactgraph: checkpoint refused')
     WHERE NOT EXISTS (
        SELECT 1 FROM runs
         WHERE id = NEW.run_id AND seq = NEW.seq - 1 AND owner = NEW.owner
           AND lease_expires_ms > NEW.now_ms);
    INSERT OR IGNORE INTO documents (digest, document)
        SELECT NEW.digest, NEW.document WHERE NEW.document IS NOT NULL;
    -- The attempt counter moves to the next step only while the run runs: an ended or
    -- paused run keeps its last step's attempt, which a reopened step continues.
    UPDATE runs SET
        seq = NEW.seq,
        steps = NEW.steps,
        termination_reason = NEW.termination_reason,
        updated_ms = NEW.now_ms,
        snapshot_seq = CASE WHEN NEW.snapshot IS NULL THEN snapshot_seq ELSE NEW.seq END,
        attempt_key = CASE WHEN NEW.running THEN NEW.next_key ELSE attempt_key END,
        attempt = CASE WHEN NEW.running THEN NEW.next_attempt ELSE attempt END
     WHERE id = NEW.run_id;
    -- Apart, and only on a change: `status` and `digest` are indexed.
    UPDATE runs SET status = NEW.status WHERE id = NEW.run_id AND status IS NOT NEW.status;
    UPDATE runs SET digest = NEW.digest WHERE id = NEW.run_id AND NEW.digest IS NOT NULL;
    -- A checkpoint is a step row, or a snapshot that replaces the run's snapshot and
    -- step rows before it: the rows kept are the checkpoints after the snapshot.
    INSERT INTO steps (run_id, seq, delta, created_ms)
        SELECT NEW.run_id, NEW.seq, NEW.delta, NEW.now_ms WHERE NEW.snapshot IS NULL;
    INSERT INTO snapshots (run_id, seq, run_state)
        SELECT NEW.run_id, NEW.seq, NEW.snapshot WHERE NEW.snapshot IS NOT NULL;
    DELETE FROM snapshots
     WHERE NEW.snapshot IS NOT NULL AND run_id = NEW.run_id AND seq < NEW.seq;
    DELETE FROM steps
     WHERE NEW.snapshot IS NOT NULL AND run_id = NEW.run_id AND seq < NEW.seq;
END;

-- A checkpoint and its chunk in one statement (a process stopped between round trips
-- never holds the write lock): the trigger writes the checkpoint through `checkpoint_in`,
-- then the chunk as bound (none when the checkpoint has no event: `last_event` below
-- `first_event`).
CREATE VIEW checkpoint_events_in (
    run_id, seq, steps, status, termination_reason, now_ms, owner, running,
    next_key, next_attempt, digest, document, delta, snapshot, events, first_event,
    last_event
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            NULL, NULL, NULL, NULL;

CREATE TRIGGER checkpoint_events_in_insert INSTEAD OF INSERT ON checkpoint_events_in
BEGIN
    INSERT INTO checkpoint_in (run_id, seq, steps, status, termination_reason, now_ms,
        owner, running, next_key, next_attempt, digest, document, delta, snapshot)
    VALUES (NEW.run_id, NEW.seq, NEW.steps, NEW.status, NEW.termination_reason,
        NEW.now_ms, NEW.owner, NEW.running, NEW.next_key, NEW.next_attempt, NEW.digest,
        NEW.document, NEW.delta, NEW.snapshot);
    INSERT INTO event_chunks (run_id, first_seq, last_seq, seq, events)
        SELECT NEW.run_id, NEW.first_event, NEW.last_event, NEW.seq, NEW.events
         WHERE NEW.last_event >= NEW.first_event;
END;
