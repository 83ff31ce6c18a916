-- tg_platform_settings__claim_lock: a new organization gets its claim lock row.
--
-- Guarantees: every organization inserted into runlane.platform_settings gets its row in
-- runlane.org_claim_locks in the same transaction (the row claim_runs locks to serialize
-- the organization's background claims), so a claim finds it in place. An organization
-- that exists already (put_org's insert on conflict) inserts nothing: the trigger runs
-- after the insert, for rows actually inserted. On a schema before 0019 (a rolling
-- upgrade's expand step, where HEAD functions already run) it does nothing.
create or replace function runlane.tg_platform_settings__claim_lock()
returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if to_regclass('runlane.org_claim_locks') is not null then
        insert into runlane.org_claim_locks (org_id)
        values (new.org_id)
        on conflict (org_id) do nothing;
    end if;
    return null;
end;
$$;

comment on function runlane.tg_platform_settings__claim_lock() is
'Adds a new organization''s row to runlane.org_claim_locks (the lock of its background claims).';

revoke all on function runlane.tg_platform_settings__claim_lock() from public;

create or replace trigger platform_settings_claim_lock
after insert on runlane.platform_settings
for each row execute function runlane.tg_platform_settings__claim_lock();
