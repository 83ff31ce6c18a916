-- _claim_check_arguments: names what is wrong with claim_runs' arguments, or returns its
-- lanes deduplicated.
--
-- Guarantees: raises, in this order, 22004 for a null p_report_skipped or worker, 22023
-- for lanes other than interactive and/or background, a limit outside 1..1000 or a lease
-- outside (0, 1 hour], 0A000 outside READ COMMITTED (the caps are exact only when each
-- statement sees what committed before it), then runlane._check_id's refusal of the
-- worker id. Otherwise returns p_lanes with a lane named twice kept once, so that no
-- read returns a run twice. claim_runs calls it only when its one-test check fails.
create or replace function runlane._claim_check_arguments(
    p_worker text,
    p_lanes text[],
    p_limit int,
    p_lease interval,
    p_report_skipped boolean
)
returns text[]
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_report_skipped is null then
        raise exception 'claim_runs needs p_report_skipped true or false'
            using errcode = '22004';
    end if;
    if p_worker is null then
        raise exception 'claim_runs needs a worker name'
            using errcode = '22004';
    end if;
    if p_lanes is null or cardinality(p_lanes) = 0
       or not p_lanes <@ array['interactive', 'background'] then
        raise exception 'claim_runs lanes must be interactive and/or background, got %',
            runlane._quote_for_error(p_lanes::text)
            using errcode = '22023';
    end if;
    if p_limit is null or p_limit < 1 or p_limit > 1000 then
        raise exception 'claim_runs limit must be between 1 and 1000, got %', p_limit
            using errcode = '22023';
    end if;
    if p_lease is null or p_lease <= interval '0' or p_lease > interval '1 hour' then
        raise exception 'claim_runs lease must be positive and at most 1 hour, got %', p_lease
            using errcode = '22023';
    end if;
    -- (only interactive and background pass above)
    if cardinality(p_lanes) > 2 or p_lanes[1] = p_lanes[2] then
        p_lanes := array(select distinct l.name from unnest(p_lanes) as l (name));
    end if;
    if current_setting('transaction_isolation') <> 'read committed' then
        raise exception 'claim_runs must run at READ COMMITTED isolation, not %',
            current_setting('transaction_isolation')
            using errcode = '0A000',
                  hint = 'Call it in its own transaction with the default isolation level.';
    end if;
    perform runlane._check_id('worker id', p_worker);
    return p_lanes;
end;
$$;

comment on function runlane._claim_check_arguments(text, text[], int, interval, boolean) is
'claim_runs'' argument checks: raises with the contract SQLSTATE for what is wrong, else '
'returns the lanes with a lane named twice kept once.';

revoke all on function runlane._claim_check_arguments(text, text[], int, interval, boolean) from public;
