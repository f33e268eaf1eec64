-- Each queued session's tenant (the object name is `<id>:<tenant>`), so one tenant's share of the
-- queue can be counted (docs/configuration.md "Persistence").
ALTER TABLE queued ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
UPDATE queued SET tenant = substr(name, 34);
CREATE INDEX queued_tenant ON queued (tenant);
