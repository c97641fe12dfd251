-- Bounded work on hostile mail. A series ends `too_large` (more parts, or a
-- larger patch mail, than the server tests), `duplicate` (the same patches
-- on the same base as a series already tested: `duplicate_of` names it) or
-- `over_quota` (its sender's or its list's daily pairs are spent).
-- SQLite cannot alter a CHECK: `series` is rebuilt. Dropping the old table
-- deletes its parts and build probes (ON DELETE CASCADE), so they are kept
-- aside and put back; `superseded_by` is set once every row is in.
CREATE TABLE series_parts_keep AS SELECT * FROM series_parts;
CREATE TABLE series_build_probes_keep AS SELECT * FROM series_build_probes;
CREATE TABLE series_new (
    id               INTEGER PRIMARY KEY,
    list_id          BIGINT  NOT NULL REFERENCES lists(id) ON DELETE CASCADE,
    series_key       TEXT    NOT NULL,
    version          BIGINT  NOT NULL,
    total            BIGINT  NOT NULL,
    rfc              BIGINT  NOT NULL,
    title            TEXT    NOT NULL,
    author_name      TEXT    NOT NULL,
    author_address   TEXT    NOT NULL,
    state            TEXT    NOT NULL
                         CHECK (state IN ('waiting', 'incomplete', 'superseded', 'cannot_apply',
                                          'testing', 'tested', 'build_failed', 'failed',
                                          'too_large', 'duplicate', 'over_quota')),
    base_sha         TEXT,
    base_how         TEXT,
    ref_name         TEXT,
    tip_sha          TEXT,
    submission_id    BIGINT  REFERENCES submissions(id) ON DELETE SET NULL,
    superseded_by    BIGINT  REFERENCES series_new(id) ON DELETE SET NULL,
    detail           TEXT,
    posted_at        BIGINT  NOT NULL,
    last_part_at     BIGINT  NOT NULL,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    duplicate_of     BIGINT  REFERENCES series_new(id) ON DELETE SET NULL,
    UNIQUE (list_id, series_key, version)
);
INSERT INTO series_new (id, list_id, series_key, version, total, rfc, title, author_name,
    author_address, state, base_sha, base_how, ref_name, tip_sha, submission_id, detail,
    posted_at, last_part_at, created_at, updated_at)
SELECT id, list_id, series_key, version, total, rfc, title, author_name, author_address, state,
    base_sha, base_how, ref_name, tip_sha, submission_id, detail, posted_at, last_part_at,
    created_at, updated_at FROM series;
UPDATE series_new SET superseded_by = (SELECT o.superseded_by FROM series o WHERE o.id = series_new.id);
DROP TABLE series;
ALTER TABLE series_new RENAME TO series;
CREATE INDEX series_list ON series (list_id, state);
CREATE INDEX series_submission ON series (submission_id);
INSERT INTO series_parts SELECT * FROM series_parts_keep;
INSERT INTO series_build_probes SELECT * FROM series_build_probes_keep;
DROP TABLE series_parts_keep;
DROP TABLE series_build_probes_keep;

-- Duplicates are found by their base and their patches' patch-ids.
CREATE INDEX series_base ON series (base_sha);

-- The breaking patch is bisected: every patch up to `good_index` builds
-- (0: the base), patch `bad_index` does not, and `bad_submission_id` is the
-- pair whose build log shows it (the tip's pair at first).
ALTER TABLE series_build_probes ADD COLUMN good_index BIGINT NOT NULL DEFAULT 0;
ALTER TABLE series_build_probes ADD COLUMN bad_index BIGINT NOT NULL DEFAULT 0;
ALTER TABLE series_build_probes ADD COLUMN bad_submission_id BIGINT;
-- A walk under way (patches built one by one from the first) goes on as a
-- bisection: the patches before the one building built, the tip did not.
UPDATE series_build_probes SET good_index = part_index - 1,
    bad_index = (SELECT s.total FROM series s WHERE s.id = series_build_probes.series_id),
    bad_submission_id = (SELECT s.submission_id FROM series s
                         WHERE s.id = series_build_probes.series_id);

-- A sender over their daily quota hears so once a day per list.
CREATE TABLE list_quota_notices (
    list_id  BIGINT  NOT NULL REFERENCES lists(id) ON DELETE CASCADE,
    sender   TEXT    NOT NULL,
    day      BIGINT  NOT NULL,
    PRIMARY KEY (list_id, sender, day)
);
