-- One schema for SQLite and PostgreSQL: ids, JSON and timestamps use types both share
-- (TEXT, BIGINT milliseconds since the epoch).
CREATE TABLE conversations (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT,
    title TEXT,
    mode TEXT NOT NULL,
    visibility TEXT NOT NULL DEFAULT 'private',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX conversations_updated ON conversations (updated_at);

CREATE TABLE messages (
    id TEXT PRIMARY KEY NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX messages_conversation ON messages (conversation_id, position);

CREATE TABLE runs (
    id TEXT PRIMARY KEY NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    user_message_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    request TEXT NOT NULL,
    owner TEXT,
    lease_until BIGINT,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    cost DOUBLE PRECISION,
    last_seq BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX runs_created ON runs (created_at);
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_message ON runs (message_id);

CREATE TABLE deliberation_stages (
    id TEXT PRIMARY KEY NOT NULL,
    message_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    stage_type TEXT NOT NULL,
    stage_order INTEGER NOT NULL,
    model TEXT,
    role TEXT,
    content TEXT NOT NULL,
    parsed_data TEXT,
    response_time_ms BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX deliberation_stages_message ON deliberation_stages (message_id, stage_order);

-- Every event of a run except streamed token deltas, so a watcher can replay a finished run.
CREATE TABLE run_events (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    event TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
