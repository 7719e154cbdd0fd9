-- `conclave eval`: an eval of a question set through several arms. Its questions and settings
-- are kept whole, so an interrupted eval resumes and two evals of one set can be compared.
CREATE TABLE evals (
    id TEXT PRIMARY KEY NOT NULL,
    set_name TEXT NOT NULL,
    -- SHA-256 of the set's text: the same set, whatever its file is called.
    set_hash TEXT NOT NULL,
    questions TEXT NOT NULL,
    settings TEXT NOT NULL,
    -- running, completed, stopped (Ctrl-C, budget).
    status TEXT NOT NULL,
    note TEXT,
    owner TEXT,
    created_at BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX evals_created ON evals (created_at);
-- One graded answer of one arm to one question (sample: 0, or 1.. for self-consistency's
-- further samples), and the run that holds it.
CREATE TABLE eval_runs (
    eval_id TEXT NOT NULL REFERENCES evals (id) ON DELETE CASCADE,
    arm TEXT NOT NULL,
    question_id TEXT NOT NULL,
    sample INTEGER NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    grade TEXT NOT NULL,
    answer TEXT,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cost DOUBLE PRECISION,
    latency_ms BIGINT NOT NULL,
    PRIMARY KEY (eval_id, arm, question_id, sample)
);
CREATE INDEX eval_runs_run ON eval_runs (run_id);
