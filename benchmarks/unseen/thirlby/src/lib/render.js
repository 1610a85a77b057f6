'use strict';

const fs = require('fs');

// Where every sent reminder is recorded, one JSON object per line.
const SENT_LOG = 'logs/sent.jsonl';

/**
 * The reminder email to one borrower: a subject line and a plain-text body listing
 * each overdue book, its due date and its fine so far.
 */
function renderReminder(borrower, books) {
  const lines = books.map((b) => `- ${b.title} (due ${b.dueDate.toDateString()}, fine £${(b.fine / 100).toFixed(2)})`);
  return {
    to: borrower.email,
    subject: books.length === 1 ? 'A library book is overdue' : `${books.length} library books are overdue`,
    text: [`Dear ${borrower.name},`, '', 'These books are past their due date:', ...lines].join('\n'),
  };
}

/** Append one sent email to the log, so the next morning knows how many reminders each loan had. */
function recordSent(email, when) {
  fs.appendFileSync(SENT_LOG, JSON.stringify({ to: email.to, subject: email.subject, when }) + '\n');
}

module.exports = { renderReminder, recordSent, SENT_LOG };
