-- 0020 — API logins are entered per role, not per name, and an API login acts only
-- where this database has an entry for it: runlane.api_logins replaces runlane.api_scopes.
--
-- * runlane.api_logins: one row per login (its role oid, so a rename keeps the row and a
--   new role that takes the old name has none), org_id the one organization it acts for,
--   or NULL for every organization on purpose. runlane._api_org refuses (42501) a login
--   holding runlane_api with no row here (superusers and the schema owner's members
--   aside). Written only through runlane.scope_api_login (no grant to either role).
-- * Carried over without changing anyone's access: every scope keeps its organization
--   (for the role that has its name now), and every login that holds runlane_api today,
--   directly or through another role, and has no scope gets an unscoped row. Superusers
--   get none (they act unscoped anyway). Scopes of names no role has are not carried:
--   they limited nobody.
-- * runlane.api_scopes stays, unread by the functions installed with this migration:
--   sessions still running the functions of the schema before (between this commit and
--   the functions' reinstall, or a rolling upgrade's older processes) keep reading their
--   scopes there instead of failing or, if it were gone, acting unscoped. A later
--   contract step drops it.
create table runlane.api_logins (
    role_oid oid primary key,
    org_id text references runlane.platform_settings (org_id),
    entered_at timestamptz not null default now()
);
comment on table runlane.api_logins is
'Logins allowed to act through runlane_api in this database, by role oid: org_id is the one '
'organization they act for, NULL every organization on purpose. Written by runlane.scope_api_login.';
revoke all on table runlane.api_logins from public;

insert into runlane.api_logins (role_oid, org_id, entered_at)
select
    r.oid,
    s.org_id,
    s.scoped_at
from runlane.api_scopes as s
inner join pg_catalog.pg_roles as r on s.login = r.rolname;

insert into runlane.api_logins (role_oid, org_id)
select
    r.oid,
    null as org_id
from pg_catalog.pg_roles as r
where
    r.rolcanlogin
    and not r.rolsuper
    and pg_catalog.pg_has_role(r.oid, 'runlane_api', 'member')
    and not exists (
        select 1 from runlane.api_logins as l
        where l.role_oid = r.oid
    );

comment on table runlane.api_scopes is
'Superseded by runlane.api_logins (0020); kept for the functions of schemas before it, '
'which read it during an upgrade. Written by nothing.';
