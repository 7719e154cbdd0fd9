DROP TABLE run_attachments;
DROP TABLE attachments;
DROP TABLE attachment_blobs;
