-- Attachments. A file's content is stored once, by its SHA-256 (attachment_blobs), with the
-- text a model reads (a PDF's extracted text; empty for an image). An upload (attachments) is
-- one person's named copy, with the media type its name gives it (the same bytes may be a
-- notes.md and a notes.txt): its id is what a start request names, and only its owner may. A
-- run lists its uploads in order (run_attachments); a run's viewers see them through the run.
CREATE TABLE attachment_blobs (
    sha256 TEXT PRIMARY KEY NOT NULL,
    kind TEXT NOT NULL,
    size BIGINT NOT NULL,
    content BLOB NOT NULL,
    text TEXT NOT NULL,
    pages INTEGER,
    created_at BIGINT NOT NULL
);
CREATE TABLE attachments (
    id TEXT PRIMARY KEY NOT NULL,
    sha256 TEXT NOT NULL REFERENCES attachment_blobs (sha256),
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    owner TEXT,
    created_at BIGINT NOT NULL
);
CREATE TABLE run_attachments (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    attachment_id TEXT NOT NULL REFERENCES attachments (id),
    PRIMARY KEY (run_id, position)
);
