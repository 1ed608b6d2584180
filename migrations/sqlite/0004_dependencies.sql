-- Run dependencies (issue 17): a run created `--after` other runs is `waiting` until each
-- is final. Its row says until when it waits, what it does when one fails, and which
-- slice receives their results; `dependencies` lists them in the order given.

ALTER TABLE runs ADD COLUMN dep_deadline_ms INTEGER;
ALTER TABLE runs ADD COLUMN on_dep_failure TEXT;
ALTER TABLE runs ADD COLUMN dep_result TEXT;

CREATE TABLE dependencies (
    run_id   TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    dep_id   TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX dependencies_dep ON dependencies (dep_id);

-- What a worker looks for: runs not yet final and not paused. A partial index: a row is
-- in it while its status is one of these.
CREATE INDEX runs_runnable ON runs (id) WHERE status IN ('queued', 'waiting', 'running');

-- The checkpoint trigger again (migration 3), writing `status` apart and only when it
-- changes: naming it in the main update would rewrite the `runs_runnable` entry at
-- every step.
DROP TRIGGER checkpoint_in_insert;
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
