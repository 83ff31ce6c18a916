-- 0030 — an API login's entry holds on every node of a Citus cluster.
--
-- * runlane.api_logins names a login by its role oid, and an oid is one server's: Citus
--   creates a login on every node under the same name and a different oid. On a worker
--   node the coordinator's oid names nobody, so a call sent there straight (the one-hop
--   path to an organization's node) would find no entry and be refused.
-- * runlane.api_login_nodes: for each Citus worker node (its group) the oid the login has
--   there, next to the entry it stands for (login_oid, the coordinator's oid). Written by
--   runlane.scope_api_login on Citus; on plain PostgreSQL, one server, it stays empty. A
--   node added later has no row until the login is entered again: refused there, never
--   let through. A row whose entry is gone names no entry and is ignored, then removed.
-- * No foreign key to runlane.api_logins: on a distributed schema a key to a reference
--   table makes Citus take a new table into its metadata at once and send this file's
--   later statements, one string of several, to every node, which it cannot.
--   runlane migrate --citus makes the table a reference table.
create table runlane.api_login_nodes (
    node_group int not null,
    role_oid oid not null,
    login_oid oid not null,
    primary key (node_group, role_oid)
);
create index api_login_nodes_login_idx on runlane.api_login_nodes (login_oid);
comment on table runlane.api_login_nodes is
'An API login''s oid on each Citus worker node (node_group), for its entry in runlane.api_logins '
'(login_oid). Written by runlane.scope_api_login; empty on plain PostgreSQL.';
revoke all on table runlane.api_login_nodes from public;
