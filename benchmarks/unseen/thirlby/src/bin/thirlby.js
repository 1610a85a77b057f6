#!/usr/bin/env node
'use strict';

const { ReminderQueue } = require('../lib/queue');
const { recordSent } = require('../lib/render');

/** `thirlby send [--dry-run]`: email this morning's reminders, or print them with --dry-run. */
async function main(argv) {
  const [command, ...flags] = argv;
  if (command !== 'send') {
    console.error('usage: thirlby send [--dry-run]');
    return 2;
  }
  const dryRun = flags.includes('--dry-run');
  const queue = new ReminderQueue(await readLoans(), new Date());
  for (const email of queue.emails()) {
    if (dryRun) {
      console.log(`${email.to}: ${email.subject}`);
    } else {
      await sendMail(email);
      recordSent(email, new Date().toISOString());
    }
  }
  return 0;
}

main(process.argv.slice(2)).then((code) => process.exit(code));
