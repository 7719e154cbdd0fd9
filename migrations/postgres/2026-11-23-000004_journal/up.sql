-- Crash recovery. Every input a run's mode received (its start, each model reply, each timer
-- that fired) is journaled in the same transaction as the stage rows and events it produced,
-- so a run left `running` by a dead process is rebuilt by feeding the journal back into its
-- (deterministic) mode and resumes with the calls that were still in flight. A run's journal
-- is deleted when the run ends.
CREATE TABLE run_journal (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step BIGINT NOT NULL,
    kind TEXT NOT NULL,
    call_key TEXT,
    data JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, step)
);

-- Which process executes a running run; `lease_until` (already present) is its heartbeat.
ALTER TABLE runs ADD COLUMN lease_owner TEXT;
