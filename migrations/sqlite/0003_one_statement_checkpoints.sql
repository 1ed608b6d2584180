-- A checkpoint is one statement: an insert into the `checkpoint_in` view, whose trigger
-- fences the write (the run is at the previous checkpoint, and `owner` holds a current
-- lease), updates the run row, and appends the step row or, when a snapshot comes
-- with it, keeps the snapshot instead, as the run's only one, and drops the step rows
-- it covers. One
-- statement is one implicit transaction and one round trip to SQLite.
--
-- `runs_updated` goes: no query used it (pruning by age filters rows it lists), and
-- every checkpoint paid a page write to keep it.

DROP INDEX runs_updated;

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
        status = NEW.status,
        termination_reason = NEW.termination_reason,
        updated_ms = NEW.now_ms,
        snapshot_seq = CASE WHEN NEW.snapshot IS NULL THEN snapshot_seq ELSE NEW.seq END,
        attempt_key = CASE WHEN NEW.running THEN NEW.next_key ELSE attempt_key END,
        attempt = CASE WHEN NEW.running THEN NEW.next_attempt ELSE attempt END
     WHERE id = NEW.run_id;
    -- Apart: naming `digest` in the update above would rewrite its index entry each time.
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
