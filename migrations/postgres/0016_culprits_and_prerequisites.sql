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
