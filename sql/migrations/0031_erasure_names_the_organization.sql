-- 0031 — the erasure helpers take the organization, which every statement names (on Citus
-- an erasure then runs on the organization's node alone). Their earlier forms, which no
-- function calls any more, go. No table is locked.
drop function if exists runlane._erase_runs(bigint[]);
drop function if exists runlane._erase_agents(text, text[]);
drop function if exists runlane._lock_for_erasure(text[]);
