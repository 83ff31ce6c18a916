-- 0008 — the charge ledger: spend is recorded when it happens and counted in the week it
-- was made, whatever became of the run.
--
-- runlane.charges holds one row per charge (runlane.charge, or the cost a finish passes),
-- stamped with the owner and organization the run's agent had when it was charged.
-- runlane.charge_buckets holds the same amounts summed per owner and UTC quarter hour, so
-- an owner's weekly spend reads at most a week of quarter hours (about 672 rows) however
-- many charges the week holds; only a week boundary that is not on a quarter hour (no
-- zone in use today has one) reads the ledger rows of its partial quarter. Both are
-- written only by runlane._record_charge, which keeps each bucket the sum of its charges.
--
-- Existing spend is carried over: one charge per run with a positive, finite cost, at the
-- run's finish (else its creation), so existing installs keep their weekly spend.

create table runlane.charges (
    charge_id bigint generated always as identity primary key,
    run_id bigint not null references runlane.runs (run_id) on delete cascade,
    org_id text not null,
    owner_id text not null,
    attempt int not null,
    amount numeric not null,
    charged_at timestamptz not null default clock_timestamp(),
    -- NaN compares above 'Infinity' in PostgreSQL: the upper bound refuses both.
    constraint charges_amount_positive_finite check (amount > 0 and amount < 'Infinity')
);
comment on table runlane.charges is
'The charge ledger: one row per charge of a run, with the owner and organization charged; '
'weekly_spend counts it in the week of charged_at.';

-- Edges of a week (and any exact sum over a time range) for one owner: index only.
create index charges_owner_time_idx on runlane.charges (owner_id, charged_at) include (amount);
-- A run's charges (and the cascade when a run is purged).
create index charges_run_idx on runlane.charges (run_id);

create table runlane.charge_buckets (
    owner_id text not null,
    bucket_start timestamptz not null,
    amount numeric not null,
    constraint charge_buckets_pkey primary key (owner_id, bucket_start) include (amount)
);
comment on table runlane.charge_buckets is
'Sum of runlane.charges per owner and UTC quarter hour (date_bin 15 minutes from '
'2000-01-01 00:00 UTC), kept by runlane._record_charge.';

insert into runlane.charges (run_id, org_id, owner_id, attempt, amount, charged_at)
select
    r.run_id,
    r.org_id,
    a.owner_id,
    greatest(r.attempts, 1) as attempt,
    r.cost as amount,
    coalesce(r.finished_at, r.created_at) as charged_at
from runlane.runs as r
inner join runlane.agents as a on r.agent_id = a.agent_id
where r.cost > 0 and r.cost < 'Infinity'::numeric
order by r.run_id;

insert into runlane.charge_buckets (owner_id, bucket_start, amount)
select
    c.owner_id,
    date_bin('15 minutes', c.charged_at, timestamptz '2000-01-01 00:00:00+00') as bucket_start,
    sum(c.amount) as amount
from runlane.charges as c
group by c.owner_id, bucket_start;
