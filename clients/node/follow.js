#!/usr/bin/env node
// runlane from Node.js with the `pg` package: send a chat message and stream its reply.
//
//   node follow.js DSN AGENT_ID THREAD_ID MESSAGE    send a message, then follow its run
//                                                    (held: the run that answers it)
//   node follow.js DSN --run RUN_ID [--after ID]     follow an existing run
//
// Needs only the runlane_api role. Prints one JSON object per line:
//   {"event":"submitted","message_id":…,"run_id":…,"disposition":"created"}
//   {"event":"answered_by","message_id":…,"run_id":…}   a held message's run, once it exists
//   {"event":"output","output_id":…,"attempt":1,"kind":"text","body":"…"}
//   {"event":"superseded","through":…}   outputs with output_id <= through were replaced
//   {"event":"end","state":"succeeded","reason":null,"attempt":…,"last_output_id":…}
// and exits like `runlane follow`: 0 succeeded, 3 failed, 4 canceled, 5 skipped,
// 6 unknown run (RL008), 1 any other error.
//
// The end-of-stream rule (README, "Ending a stream"), the same in every language:
//   1. LISTEN runlane_outputs BEFORE the first read, so no output is missed.
//   2. Read run_status (state, attempt, last_output_id), THEN page outputs_since until a
//      page is short.
//   3. Ended when that status was terminal (succeeded, failed, canceled, skipped) and you
//      have seen output last_output_id: a finished run never gets another output.
//   4. Else wait for a notification whose {"stream": token} is this run's stream_token
//      (every output and the run's finish send one; or a second: notifications are
//      hints); go to 2. While
//      runlane.notify_queue_usage() is at least 0.25 (read at most once a second; from
//      0.5 runlane sends no notification at all) wait 0.1 s instead: paging alone.
//   5. When run_status's attempt changes, read superseded_through: outputs up to it are
//      the partial output of an attempt that a later attempt, starting over, replaced.
// A message submit_message answers `held` waits for its thread's running run: poll
// runlane.message_status until it names the run that answers it, then follow that run.
'use strict';

const pg = require('pg');

pg.types.setTypeParser(20, Number); // bigint ids: well below 2^53

const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'skipped']);
const EXIT = { succeeded: 0, failed: 3, canceled: 4, skipped: 5, unknown: 6 };
const PAGE = 500;
const POLL_MS = 1000;
const FAST_POLL_MS = 100; // while notifications cannot be counted on
const QUEUE_CHECK_MS = 1000;
const HELD_POLL_MS = 200; // message_status is one primary-key read
const UNTRUSTED_FROM = 0.25;

const print = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

async function one(client, sql, params) {
  return (await client.query(sql, params)).rows[0];
}

// Resolves on the next notification for this stream (at once if one came while we were
// reading), or after `ms`.
function waiter(client) {
  let token = null;
  let heard = false;
  let wake = null;
  client.on('notification', (note) => {
    let stream = null;
    try {
      stream = JSON.parse(note.payload).stream;
    } catch (e) {
      // a hint only: an unreadable payload is ignored; the poll pages anyway
    }
    if (token !== null && stream !== token) return;
    heard = true;
    if (wake) wake();
  });
  return {
    setToken(value) { token = value; },
    next(ms) {
      return new Promise((resolve) => {
        const timer = setTimeout(() => { wake = null; resolve(); }, ms);
        wake = () => { clearTimeout(timer); wake = null; resolve(); };
        if (heard) wake();
      }).then(() => { heard = false; });
    },
  };
}

async function follow(client, hints, runId, after) {
  hints.setToken((await one(client, 'select runlane.stream_token($1) as t', [runId])).t);
  let last = after;
  let checkedAttempt = null;
  let superseded = 0;
  let pending = null; // a superseded_through to print once the outputs up to it are printed
  let checkedAt = -Infinity; // when the NOTIFY queue was last read
  let untrusted = false; // it was at least UNTRUSTED_FROM full then
  const announce = () => {
    superseded = pending;
    pending = null;
    print({ event: 'superseded', run_id: runId, through: superseded });
  };
  for (;;) {
    const status = await one(client,
      'select state, reason, attempt, last_output_id from runlane.run_status($1)', [runId]);
    if (status.attempt !== checkedAttempt) {
      checkedAttempt = status.attempt;
      const through = (await one(client,
        'select runlane.superseded_through($1) as through', [runId])).through;
      if (through > superseded) pending = through;
    }
    for (;;) {
      const { rows } = await client.query(
        'select output_id, attempt, kind, body from runlane.outputs_since($1, $2, $3)',
        [runId, last, PAGE]);
      for (const row of rows) {
        if (pending !== null && row.output_id > pending) announce();
        print({ event: 'output', run_id: runId, ...row });
        last = row.output_id;
      }
      if (rows.length < PAGE) break;
    }
    if (pending !== null) announce();
    if (TERMINAL.has(status.state)
        && (status.last_output_id === null || last >= status.last_output_id)) {
      print({ event: 'end', run_id: runId, ...status, superseded_through: superseded });
      return EXIT[status.state];
    }
    if (Date.now() - checkedAt >= QUEUE_CHECK_MS) {
      checkedAt = Date.now();
      try {
        const usage = (await one(client, 'select runlane.notify_queue_usage() as u')).u;
        untrusted = usage !== null && usage >= UNTRUSTED_FROM;
      } catch (e) {
        untrusted = false; // not readable here: wait for hints and the poll as usual
      }
    }
    await hints.next(untrusted ? FAST_POLL_MS : POLL_MS);
  }
}

// The run that answers a held message: message_status names it once the thread's
// running run ended and its follow-up run exists (or the running run took the message).
async function answeredBy(client, messageId) {
  for (;;) {
    const status = await one(client,
      'select state, run_id from runlane.message_status($1)', [messageId]);
    if (status.run_id !== null) return status.run_id;
    await new Promise((resolve) => setTimeout(resolve, HELD_POLL_MS));
  }
}

async function main(argv) {
  const [dsn, ...rest] = argv;
  if (!dsn || rest.length === 0) {
    process.stderr.write('usage: follow.js DSN AGENT_ID THREAD_ID MESSAGE | DSN --run RUN_ID [--after ID]\n');
    return 2;
  }
  const client = new pg.Client({ connectionString: dsn });
  await client.connect();
  try {
    const hints = waiter(client);
    await client.query('LISTEN runlane_outputs'); // first: nothing committed after it is missed
    let runId;
    let after = 0;
    if (rest[0] === '--run') {
      runId = Number(rest[1]);
      if (rest[2] === '--after') after = Number(rest[3]);
    } else {
      const [agentId, threadId, body] = rest;
      const sent = await one(client,
        'select message_id, run_id, disposition from runlane.send_message($1, $2, $3)',
        [agentId, threadId, body]);
      print({ event: 'submitted', ...sent });
      if (sent.run_id === null) {
        runId = await answeredBy(client, sent.message_id);
        print({ event: 'answered_by', message_id: sent.message_id, run_id: runId });
      } else {
        runId = sent.run_id; // send_message announced a created run with its commit
      }
    }
    return await follow(client, hints, runId, after);
  } catch (err) {
    process.stderr.write(`${err.code || 'error'}: ${err.message}\n`);
    return err.code === 'RL008' ? EXIT.unknown : 1;
  } finally {
    await client.end();
  }
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (err) => {
  process.stderr.write(`error: ${err.message}\n`);
  process.exitCode = 1;
});
