-- The run store: documents once per digest, one row per run, one row per committed
-- step (its delta), and the latest snapshot of each run's whole state.
-- Plain SQL types (TEXT, INTEGER) so the PostgreSQL backend can share it.

CREATE TABLE documents (
    digest   TEXT PRIMARY KEY NOT NULL,
    document TEXT NOT NULL
);

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
    lease_expires_ms   INTEGER
);

CREATE INDEX runs_name ON runs (name);
CREATE INDEX runs_workflow ON runs (workflow);
CREATE INDEX runs_digest ON runs (digest);

CREATE TABLE steps (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    delta      TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE snapshots (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    run_state TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
