-- Bounded work on hostile mail. A series ends `too_large` (more parts, or a
-- larger patch mail, than the server tests), `duplicate` (the same patches
-- on the same base as a series already tested: `duplicate_of` names it) or
-- `over_quota` (its sender's or its list's daily pairs are spent).
ALTER TABLE series DROP CONSTRAINT series_state_check;
ALTER TABLE series ADD CONSTRAINT series_state_check
    CHECK (state IN ('waiting', 'incomplete', 'superseded', 'cannot_apply', 'testing', 'tested',
                     'build_failed', 'failed', 'too_large', 'duplicate', 'over_quota'));
ALTER TABLE series ADD COLUMN duplicate_of BIGINT REFERENCES series(id) ON DELETE SET NULL;

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
