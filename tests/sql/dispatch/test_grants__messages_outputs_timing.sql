-- The message, output and timing functions are security definer and granted per role.
begin;
select plan(14);

select is_definer('runlane', 'submit_message', array['text', 'text', 'text'], 'submit_message is security definer');
select is_definer('runlane', 'append_output', array['bigint', 'bigint', 'text', 'text'], 'append_output is security definer');
select is_definer('runlane', 'outputs_since', array['bigint', 'bigint', 'integer'], 'outputs_since is security definer');

select ok(
    has_function_privilege('runlane_api', 'runlane.submit_message(text, text, text)', 'execute'),
    'the api role may submit messages'
);
select ok(
    not has_function_privilege('runlane_worker', 'runlane.submit_message(text, text, text)', 'execute'),
    'the worker role may not submit messages'
);
select ok(
    has_function_privilege('runlane_api', 'runlane.publish_run(bigint, timestamptz)', 'execute')
    and has_function_privilege('runlane_worker', 'runlane.publish_run(bigint, timestamptz)', 'execute'),
    'the api and worker roles may publish runs'
);
select ok(
    has_function_privilege('runlane_worker', 'runlane.run_messages(bigint, bigint)', 'execute')
    and not has_function_privilege('runlane_api', 'runlane.run_messages(bigint, bigint)', 'execute'),
    'only the worker role may read a run''s messages'
);
select ok(
    has_function_privilege('runlane_worker', 'runlane.take_steering(bigint, bigint)', 'execute')
    and has_function_privilege('runlane_worker', 'runlane.append_output(bigint, bigint, text, text)', 'execute')
    and has_function_privilege('runlane_worker', 'runlane.save_checkpoint(bigint, bigint, jsonb)', 'execute'),
    'the worker role may take steering, append output and save checkpoints'
);
select ok(
    not has_function_privilege('runlane_api', 'runlane.append_output(bigint, bigint, text, text)', 'execute'),
    'the api role may not append output'
);
select ok(
    has_function_privilege('runlane_api', 'runlane.outputs_since(bigint, bigint, integer)', 'execute')
    and not has_function_privilege('runlane_worker', 'runlane.outputs_since(bigint, bigint, integer)', 'execute'),
    'the api role may page outputs; the worker role reads no run''s text but the one it owns'
);
select ok(
    has_function_privilege('runlane_api', 'runlane.run_timing(bigint)', 'execute')
    and has_function_privilege('runlane_worker', 'runlane.run_timing(bigint)', 'execute'),
    'the api and worker roles may read run timing'
);
select ok(
    not has_function_privilege('runlane_api', 'runlane._dispatch_held_messages(text, text)', 'execute')
    and not has_function_privilege('runlane_worker', 'runlane._dispatch_held_messages(text, text)', 'execute'),
    'no role may call _dispatch_held_messages directly'
);
select ok(
    not has_function_privilege('runlane_worker', 'runlane._timing_row(bigint, text)', 'execute'),
    '_timing_row is private'
);

-- Through the role, with no table privileges, chat works end to end.
do $$ begin perform runlane_test.agent('agent-a'); end $$;
set local role runlane_api;
select is(
    (select disposition from runlane.submit_message('agent-a', 'thread-1', 'as the api')),
    'created',
    'the api role submits a message through the function alone'
);
reset role;

select * from finish();
rollback;
