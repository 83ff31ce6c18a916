-- A search_path hijack has no effect: a caller who puts a schema of their own AHEAD of
-- pg_catalog (and temporary look-alikes of our tables in pg_temp) and then calls
-- submit_message, claim_runs, append_output and finish_runs (the claim and the finish
-- inline _timing_of), and the dashboard's agent reads (they inline
-- _agent_runs_newest_first, which has no path of its own), through the proper roles
-- reaches none of the shadowing objects. Every evil function, operator and view records
-- a marker row when used (and otherwise behaves like the real thing, so silent use would
-- not show as an error); the test asserts there is no marker and that the calls did
-- their work.
begin;
select plan(10);

create schema evil;
create table evil.marker (used text not null);
grant usage on schema evil to public;
grant insert, select on evil.marker to public;

create function evil.mark(p_what text) returns boolean
language sql volatile as $$
    insert into evil.marker (used) values (p_what);
    select true;
$$;
create function evil.now() returns timestamptz
language sql volatile as $$ select evil.mark('now()'); select pg_catalog.now(); $$;
create function evil.clock_timestamp() returns timestamptz
language sql volatile as $$ select evil.mark('clock_timestamp()'); select pg_catalog.clock_timestamp(); $$;
create function evil.lower(text) returns text
language sql volatile as $$ select evil.mark('lower(text)'); select pg_catalog.lower($1); $$;
create function evil.btrim(text) returns text
language sql volatile as $$ select evil.mark('btrim(text)'); select pg_catalog.btrim($1); $$;
create function evil.length(text) returns integer
language sql volatile as $$ select evil.mark('length(text)'); select pg_catalog.length($1); $$;
create function evil.pg_notify(text, text) returns void
language sql volatile as $$ select evil.mark('pg_notify(text,text)'); select pg_catalog.pg_notify($1, $2); $$;
create function evil.pg_advisory_xact_lock(bigint) returns void
language sql volatile as $$
    select evil.mark('pg_advisory_xact_lock(bigint)'); select pg_catalog.pg_advisory_xact_lock($1);
$$;
create function evil.hashtextextended(text, bigint) returns bigint
language sql volatile as $$
    select evil.mark('hashtextextended(text,bigint)'); select pg_catalog.hashtextextended($1, $2);
$$;
create function evil.cardinality(anyarray) returns integer
language sql volatile as $$ select evil.mark('cardinality(anyarray)'); select pg_catalog.cardinality($1); $$;
create function evil.text_eq(text, text) returns boolean
language sql volatile as $$ select evil.mark('=(text,text)'); select pg_catalog.texteq($1, $2); $$;
create function evil.int8_eq(bigint, bigint) returns boolean
language sql volatile as $$ select evil.mark('=(bigint,bigint)'); select pg_catalog.int8eq($1, $2); $$;
-- (created through execute: the linter cannot parse create operator)
do $$
begin
    execute 'create operator evil.= (leftarg = text, rightarg = text, function = evil.text_eq)';
    execute 'create operator evil.= (leftarg = bigint, rightarg = bigint, function = evil.int8_eq)';
end
$$;

-- Look-alike tables an unqualified reference would find: in evil, and in pg_temp (which
-- an unpinned path searches first for relations).
create view evil.runs as select r.* from runlane.runs as r where evil.mark('evil.runs');
create view evil.agents as select a.* from runlane.agents as a where evil.mark('evil.agents');
create view evil.messages as select m.* from runlane.messages as m where evil.mark('evil.messages');
create view evil.computer_leases as
select cl.* from runlane.computer_leases as cl where evil.mark('evil.computer_leases');
create view evil.platform_settings as
select s.* from runlane.platform_settings as s where evil.mark('evil.platform_settings');
create temporary view runs as select r.* from runlane.runs as r where evil.mark('pg_temp.runs');
create temporary view run_outputs as
select o.* from runlane.run_outputs as o where evil.mark('pg_temp.run_outputs');
grant select on all tables in schema evil to public;

-- The shadowing works on an unpinned caller: the trap is armed (or this test proves nothing).
set local search_path = evil, pg_catalog, public;
do $$
begin
    perform now(), lower('X'), 'a'::text = 'a'::text;
end
$$;
reset search_path;
select is(
    (select count(distinct used) from evil.marker),
    3::bigint,
    'with evil ahead of pg_catalog, an unpinned body resolves now(), lower() and = to the evil objects'
);
delete from evil.marker;

do $$ begin perform runlane_test.agent('agent-hijack', 'org-hijack', 'computer-hijack'); end $$;
-- A finished run of a day before, so that the agent reads below read a row from every
-- source they merge (a look-alike view is only caught where it yields a row).
insert into runlane.runs (
    org_id, agent_id, lane, trigger, state, prompt, model, created_at, finished_at
)
values (
    'org-hijack', 'agent-hijack', 'background', 'manual', 'succeeded', 'x', 'noop',
    now() - interval '1 day', now() - interval '1 day' + interval '1 minute'
);

-- The hijacked calls, each as its proper role. Errors are captured, not raised, so that
-- the assertions below run with a clean path (pgTAP itself is not pinned).
set local role runlane_api;
set local search_path = evil, pg_catalog, public;
do $$
declare
    v_row record;
begin
    select s.message_id, s.run_id, s.disposition into v_row
    from runlane.submit_message('agent-hijack', 'thread-hijack', 'hello from a hijacked path') as s;
    perform pg_catalog.set_config('hijack.submit', v_row.disposition, true);
exception when others then
    perform pg_catalog.set_config('hijack.submit', pg_catalog.concat('error ', sqlstate, ' ', sqlerrm), true);
end
$$;
reset search_path;
reset role;

set local role runlane_worker;
set local search_path = evil, pg_catalog, public;
do $$
declare
    v_claim record;
    v_timing jsonb;
begin
    select c.run_id, c.fence into v_claim
    from runlane.claim_runs('worker-hijack', array['interactive']::text[], 10, interval '60 seconds') as c;
    perform pg_catalog.set_config('hijack.claim', pg_catalog.concat(v_claim.run_id, '/', v_claim.fence), true);
    v_timing := runlane.append_output(v_claim.run_id, v_claim.fence, 'text', 'first words');
    perform pg_catalog.set_config('hijack.append', pg_catalog.concat('timing ', v_timing ->> 'event'), true);
exception when others then
    perform pg_catalog.set_config('hijack.append', pg_catalog.concat('error ', sqlstate, ' ', sqlerrm), true);
end
$$;
reset search_path;
reset role;

-- The dashboard's agent reads, as the api role: each inlines _agent_runs_newest_first,
-- which pins no search_path of its own (it runs under its callers' pinned path).
set local role runlane_api;
set local search_path = evil, pg_catalog, public;
do $$
declare
    v_page bigint;
    v_last bigint;
    v_journal bigint;
begin
    select p.last_run_id into v_page from runlane.agent_page(null, 10, 'agent-hijack', null) as p;
    -- (the caller's own comparison, under the evil path, is spelled out as pg_catalog's)
    select l.run_id into v_last
    from runlane.agent_last_runs() as l
    where l.agent_id operator(pg_catalog.=) 'agent-hijack';
    select j.run_id into v_journal from runlane.agent_journal('agent-hijack', 10) as j;
    perform pg_catalog.set_config('hijack.agent_reads', pg_catalog.concat_ws('/', v_page, v_last, v_journal), true);
exception when others then
    perform pg_catalog.set_config('hijack.agent_reads', pg_catalog.concat('error ', sqlstate, ' ', sqlerrm), true);
end
$$;
reset search_path;
reset role;

select is(
    current_setting('hijack.submit', true),
    'created',
    'submit_message as the api role under a hijacked search_path created the run'
);
select is(
    current_setting('hijack.claim', true),
    (
        select r.run_id || '/' || r.fence
        from runlane.runs as r
        where r.agent_id = 'agent-hijack' and r.state = 'running' and r.lease_owner = 'worker-hijack'
    ),
    'claim_runs as the worker role under a hijacked search_path took the run'
);
select is(
    current_setting('hijack.append', true),
    'timing run.first_response',
    'append_output as the worker role under a hijacked search_path stored the first response'
);
select is(
    (
        select array_agg(o.body)
        from runlane.run_outputs as o
        inner join runlane.runs as r on o.org_id = r.org_id and o.run_id = r.run_id
        where r.agent_id = 'agent-hijack'
    ),
    array['first words'],
    'the output went to the real run_outputs table'
);
select is(
    (select count(*) from runlane.computer_leases where computer_id = 'computer-hijack'),
    1::bigint,
    'the computer lease went to the real computer_leases table'
);

-- The finish, as the worker role: it builds its timing row with _timing_of inlined (no
-- path of its own).
create temp table hijack_claimed on commit drop as
select
    r.run_id,
    r.fence
from runlane.runs as r
where r.agent_id = 'agent-hijack' and r.state = 'running';
grant select on hijack_claimed to runlane_worker;
set local role runlane_worker;
set local search_path = evil, pg_catalog, public;
do $$
declare
    v_timing jsonb;
begin
    select f.timing into v_timing
    from pg_temp.hijack_claimed as c
    cross join lateral runlane.finish_runs(
        array[c.run_id], array[c.fence], array['succeeded'], array[null]::text[],
        array[0]::numeric[], array[0], array[]::text[], array[]::text[]
    ) as f;
    perform pg_catalog.set_config('hijack.finish', pg_catalog.concat('timing ', v_timing ->> 'event'), true);
exception when others then
    perform pg_catalog.set_config('hijack.finish', pg_catalog.concat('error ', sqlstate, ' ', sqlerrm), true);
end
$$;
reset search_path;
reset role;
select is(
    (
        select pg_catalog.concat(current_setting('hijack.finish', true), ' ', r.state)
        from runlane.runs as r
        where r.agent_id = 'agent-hijack' and r.lane = 'interactive'
    ),
    'timing run.finished succeeded',
    'finish_runs as the worker role under a hijacked search_path closed the run with its timing row'
);
select is(
    current_setting('hijack.agent_reads', true),
    (
        select pg_catalog.concat_ws('/', r.run_id, r.run_id, r.run_id)
        from runlane.runs as r
        where r.agent_id = 'agent-hijack' and r.lane = 'interactive'
    ),
    'agent_page, agent_last_runs and agent_journal under a hijacked search_path read the agent''s newest run'
);
select is(
    (select array_agg(distinct used order by used) from evil.marker),
    null,
    'no evil function, operator, view or temporary look-alike was ever used by our functions'
);
select is(
    (
        select count(*) from runlane.messages
        where agent_id = 'agent-hijack' and body = 'hello from a hijacked path'
    ),
    1::bigint,
    'the message went to the real messages table'
);

select * from finish();
rollback;
