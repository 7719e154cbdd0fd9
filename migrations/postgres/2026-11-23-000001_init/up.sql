-- PostgreSQL's own schema (SQLite's is in migrations/sqlite): the same tables and columns as
-- there, in native types. JSON is `jsonb`, times are `timestamptz`; the application still sees
-- JSON values and milliseconds since the epoch (src/store/types.rs maps them). Databases made
-- by the earlier shared migrations (TEXT JSON, BIGINT milliseconds) under these same versions
-- are converted by 2026-11-23-000005_native_types.
CREATE TABLE conversations (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT,
    title TEXT,
    mode TEXT NOT NULL,
    visibility TEXT NOT NULL DEFAULT 'private',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX conversations_updated ON conversations (updated_at);

CREATE TABLE messages (
    id TEXT PRIMARY KEY NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
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
    request JSONB NOT NULL,
    owner TEXT,
    lease_until TIMESTAMPTZ,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    cost DOUBLE PRECISION,
    last_seq BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ
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
    parsed_data JSONB,
    response_time_ms BIGINT,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX deliberation_stages_message ON deliberation_stages (message_id, stage_order);

-- Every event of a run except streamed token deltas, so a watcher can replay a finished run.
CREATE TABLE run_events (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    event TEXT NOT NULL,
    data JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, seq)
);
