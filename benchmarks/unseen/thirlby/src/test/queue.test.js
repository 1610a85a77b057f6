'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { ReminderQueue } = require('../lib/queue');

test('a loan not yet due gets no reminder', () => {
  const today = new Date('2024-03-10');
  const queue = new ReminderQueue([{ dueDate: new Date('2024-03-12'), remindersSent: 0 }], today);
  assert.strictEqual(queue.due().length, 0);
});
