-- The commits kbot applied from patch mails, with the mail each came from
-- (sqlite dialect; twin: migrations/postgres/0028_posted_patches.sql).
--
-- A report on a commit that was posted to a list answers in that patch's
-- thread. Mail found the thread by reading the lists' tables (series,
-- series_parts, list_messages, lists); this table is mail's own: the lists
-- feature writes a row per patch when it applies a series
-- (`mail::thread::record_posted`), and a report reads only it. The newest
-- row of a commit wins, as the newest series did.
CREATE TABLE posted_patches (
    id            INTEGER PRIMARY KEY,
    commit_sha    TEXT    NOT NULL,
    message_id    TEXT    NOT NULL,
    -- The patch mail's References, oldest first, one id a line.
    refs          TEXT    NOT NULL,
    subject       TEXT    NOT NULL,
    from_name     TEXT    NOT NULL,
    from_address  TEXT    NOT NULL,
    -- Its To and Cc, `Name <address>` one a line.
    recipients    TEXT    NOT NULL,
    list_address  TEXT,
    web_url       TEXT,
    list_name     TEXT    NOT NULL,
    -- Where the applied series is in the server's git, and its base.
    ref_name      TEXT,
    base_sha      TEXT,
    repo_name     TEXT    NOT NULL,
    repo_url      TEXT    NOT NULL,
    branch        TEXT    NOT NULL
);
CREATE INDEX posted_patches_commit ON posted_patches (commit_sha, id);
INSERT INTO posted_patches (commit_sha, message_id, refs, subject, from_name, from_address,
                            recipients, list_address, web_url, list_name, ref_name, base_sha,
                            repo_name, repo_url, branch)
SELECT p.commit_sha, p.message_id, m.refs, m.subject, m.from_name, m.from_address, m.recipients,
       l.address, l.web_url, l.name, s.ref_name, s.base_sha, r.name, r.url, l.branch
  FROM series_parts p JOIN series s ON s.id = p.series_id
  JOIN lists l ON l.id = s.list_id JOIN repos r ON r.id = l.repo_id
  JOIN list_messages m ON m.list_id = s.list_id AND m.message_id = p.message_id
 WHERE p.commit_sha IS NOT NULL
 ORDER BY s.id, p.idx;
