-- Build orders leased in the priority of the jobs that need them (postgres
-- dialect; twin: migrations/sqlite/0026_build_order_priority.sql).
--
-- A builder leased orders by id, the order plans made them in; a plan for
-- one tbox group could order its low-priority kernel before another
-- group's urgent ones, and a cold builder built it first. An order now
-- carries the best priority of the queued jobs that needed it when it was
-- made (raised when a later plan finds a more urgent one), and builders
-- lease the highest first.
ALTER TABLE build_orders ADD COLUMN priority BIGINT NOT NULL DEFAULT 0;
