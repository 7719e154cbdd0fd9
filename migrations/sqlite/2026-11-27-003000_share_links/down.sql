DROP TABLE share_links;
