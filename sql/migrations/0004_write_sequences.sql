-- 0004 — lost acknowledgements cost a pause, never a duplicate (issue 11, item 5).
--
-- * runs.write_fence / runs.write_seq: the last worker write applied to the run, as
--   (the fence it was made under, its per-attempt sequence number). A write resent with
--   a sequence number at or below the stored one under the same fence was already
--   applied (its reply was lost): the write functions answer it without applying it
--   again. Null until the first sequenced write; a new claim's fence makes the old
--   pair stale without touching it.
-- * claim_receipts: per worker and set of lanes, the key of its last claim and what that
--   claim returned (run ids and fences), so a claim resent with the same key after a lost
--   reply returns the same runs instead of claiming new ones and orphaning the first.
--   One row per (worker, lanes), overwritten by each keyed claim: it stays as small as
--   the worker registry.
alter table runlane.runs add column write_fence bigint null;
alter table runlane.runs add column write_seq bigint null;
comment on column runlane.runs.write_fence is
'Fence of the last sequenced worker write applied to the run (with write_seq: resends are no-ops).';
comment on column runlane.runs.write_seq is
'Sequence number of the last worker write applied under write_fence.';

create table runlane.claim_receipts (
    worker_id text not null,
    lanes text[] not null,
    claim_key uuid not null,
    run_ids bigint[] not null default '{}',
    fences bigint[] not null default '{}',
    claimed_at timestamptz not null default now(),
    primary key (worker_id, lanes)
);
comment on table runlane.claim_receipts is
'The last keyed claim of each worker and lane set: a resent claim_runs with the same key '
'returns these runs (still running under these fences) instead of claiming anew.';
