-- Hardware requirements and host fingerprints (PostgreSQL dialect; twin:
-- migrations/sqlite/0009_hardware_needs.sql).
-- A job's required base page size (job files' need_page_size), matched
-- exactly against the agent's page_size, beside need_arch/need_threads/
-- need_memory_bytes.
ALTER TABLE jobs ADD COLUMN need_page_size BIGINT;
-- The machine a qemu agent runs on, as JSON (kbot_core::api::Hardware);
-- the agents columns describe the guest it boots, which jobs are matched to.
ALTER TABLE agents ADD COLUMN host_hardware TEXT;
