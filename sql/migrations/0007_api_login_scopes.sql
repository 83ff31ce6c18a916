-- 0007 — tenants: organization-scoped API logins, private output-stream tokens, and
-- the index behind the per-worker organization bound of claim_runs.
--
-- * runlane.api_scopes: a login named here acts for one organization only. Every
--   function granted to runlane_api checks it (runlane._api_org, runlane._in_scope):
--   another organization's agent, run or owner is answered exactly as an unknown one.
--   Written only through runlane.scope_api_login (no grant to either role).
-- * runlane.stream_keys: the one secret behind the per-run stream tokens that
--   runlane_outputs notifications carry instead of run ids (any login may LISTEN on
--   any channel). Readable by the schema owner only.
-- * runs_worker_running_idx: a worker's running runs per organization, what the
--   runlane.max_per_org bound of claim_runs counts.

create table runlane.api_scopes (
    login name primary key,
    org_id text not null references runlane.platform_settings (org_id),
    scoped_at timestamptz not null default now()
);
comment on table runlane.api_scopes is
'Logins that act for one organization only (checked against session_user by every '
'runlane_api function). Written by runlane.scope_api_login.';
revoke all on table runlane.api_scopes from public;

create table runlane.stream_keys (
    only_row boolean primary key default true,
    secret text not null,
    constraint stream_keys_one_row check (only_row)
);
comment on table runlane.stream_keys is
'The secret from which per-run stream tokens (runlane_outputs payloads) are derived.';
revoke all on table runlane.stream_keys from public;

insert into runlane.stream_keys (secret)
values (
    encode(
        sha256(convert_to(
            gen_random_uuid()::text || gen_random_uuid()::text || clock_timestamp()::text,
            'UTF8'
        )),
        'hex'
    )
);

create index runs_worker_running_idx on runlane.runs (lease_owner, org_id)
where state = 'running';
