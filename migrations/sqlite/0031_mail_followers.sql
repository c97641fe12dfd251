-- Who follows a tree's branches by mail (sqlite dialect; twin:
-- migrations/postgres/0031_mail_followers.sql).
--
-- A landed fix's answer is Cc'd to the lists that follow the branches
-- holding it. The mail code read them from the lists table, which the list
-- feature above it owns; a list now registers its address here when it is
-- added and takes it back when it is removed, as `list/ID`. Filled once
-- from the active lists with an address.
CREATE TABLE mail_followers (
    id        INTEGER PRIMARY KEY,
    -- Who registered the address: `list/ID`.
    follower  TEXT    NOT NULL UNIQUE,
    repo_id   BIGINT  NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    branch    TEXT    NOT NULL,
    address   TEXT    NOT NULL
);
CREATE INDEX mail_followers_branch ON mail_followers (repo_id, branch);

INSERT INTO mail_followers (follower, repo_id, branch, address)
SELECT 'list/' || id, repo_id, branch, TRIM(address) FROM lists
 WHERE state = 'active' AND address IS NOT NULL AND TRIM(address) <> ''
 ORDER BY id;
