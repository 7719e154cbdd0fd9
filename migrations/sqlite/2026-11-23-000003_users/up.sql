-- Accounts. Tokens are stored as SHA-256 hashes only: `api` tokens (printed once by
-- `conclave user add`), `session` tokens (the page's cookie) and one-time `login` tokens.
CREATE TABLE users (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL UNIQUE,
    is_admin BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);

CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

-- Runs made before accounts existed belong to nobody: every signed-in user may see them.
UPDATE conversations SET visibility = 'team' WHERE user_id IS NULL;
