-- 0006 — a run's cost is a real amount.
--
-- finish_run and finish_runs refuse a NaN, infinite or negative cost since this release
-- (runlane._require_amount). Before, one finish_run(…, 'NaN') made every later weekly_spend
-- of its owner NaN (NaN + x = NaN), so the owner's budget gate could never close or open
-- again. Costs written that way carry no amount: they become 0. Then a check constraint
-- keeps any writer (an older worker, a manual update) from storing one again. In
-- PostgreSQL NaN sorts above every number, Infinity included, so `cost < 'Infinity'`
-- excludes both.

update runlane.runs
set cost = 0
where not (cost >= 0 and cost < 'Infinity'::numeric);

alter table runlane.runs
add constraint runs_cost_is_a_charge check (cost >= 0 and cost < 'Infinity'::numeric) not valid;

alter table runlane.runs
validate constraint runs_cost_is_a_charge;
