-- Run events (issue 27, ADR 0034): every event but `model_delta`, kept with its run and
-- written in the transaction of the checkpoint that made it (docs/spec/events.md). `seq`
-- rises by one per run without gaps; `event` is the event's JSON. Runs stored before
-- this migration have no history before their first checkpoint after it.
CREATE TABLE events (
    run_id TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    BIGINT NOT NULL,
    event  TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
