-- 0028 — the outputs and journal rows written before 0027 get their run's organization.
--
-- Both tables are append-only: no function updates or locks an older row of them (a
-- tick's failure amends only the journal row it has just written; retention and erasure
-- delete finished runs' rows). So this update blocks no worker and no reader: it holds
-- ROW EXCLUSIVE on the two tables and the row locks of rows nobody else writes.
-- It writes every older row once (a new row version, WAL for each): on a large
-- installation run it at a quiet hour. Rows written since 0027 carry org_id already and
-- are not touched.
update runlane.run_outputs as o
set org_id = r.org_id
from runlane.runs as r
where r.run_id = o.run_id and o.org_id is null;

update runlane.run_events as e
set org_id = r.org_id
from runlane.runs as r
where r.run_id = e.run_id and e.org_id is null;
