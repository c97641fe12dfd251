-- One culprit, one mail: a report names the change it blames (`culprit`:
-- the patch-id, or the repository and commit when git gave none), so a
-- second bisection of the same change on another tbox group or job adds its
-- section to that report instead of writing a second one. `facts` keeps
-- what the report was rendered from (the report data and its addressing, as
-- JSON), so a report that has not left yet can be rendered again with the
-- new section, and a later finding can answer in its thread.
ALTER TABLE report_outbox ADD COLUMN culprit TEXT;
ALTER TABLE report_outbox ADD COLUMN facts TEXT;
CREATE UNIQUE INDEX report_outbox_culprit ON report_outbox (culprit);

-- A posted patch's `prerequisite-patch-id:` lines (one a line, in order):
-- the patches, posted before, that the series applies on top of its base.
ALTER TABLE list_messages ADD COLUMN prerequisites TEXT NOT NULL DEFAULT '';

-- Which patch of a series breaks the build: when the tip does not build, the
-- series' patches are built one by one from the first (`verify` pairs, base
-- against the patch) until one fails; its build error is answered in its
-- own thread. The probe under way, one per series.
CREATE TABLE series_build_probes (
    series_id     BIGINT  PRIMARY KEY REFERENCES series(id) ON DELETE CASCADE,
    part_index    BIGINT  NOT NULL,
    submission_id BIGINT  NOT NULL REFERENCES submissions(id) ON DELETE CASCADE
);
