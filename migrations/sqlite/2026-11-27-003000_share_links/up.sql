-- Share links: a read-only public page of one run. Only the token's SHA-256 is stored, as for
-- API tokens. A revoked link keeps its row (revoked_at set) so its owner sees it was revoked.
CREATE TABLE share_links (
    id TEXT PRIMARY KEY NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    token_hash TEXT NOT NULL UNIQUE,
    hide_models BOOLEAN NOT NULL DEFAULT FALSE,
    created_by TEXT,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX share_links_run ON share_links (run_id);
