'use strict';

// Late fine per book for each day it is overdue, in pence.
const FINE_PER_DAY_PENCE = 15;
// Card types that are never fined.
const FINE_FREE_CARDS = ['junior'];
// The most a single book can be fined, in pence.
const FINE_CAP_PENCE = 600;

/** The fine of one overdue loan today, in pence: per day, capped, none for fine-free cards. */
function fineFor(loan, today) {
  if (FINE_FREE_CARDS.includes(loan.cardType)) {
    return 0;
  }
  const days = Math.max(0, Math.floor((today - loan.dueDate) / 86400000));
  return Math.min(days * FINE_PER_DAY_PENCE, FINE_CAP_PENCE);
}

module.exports = { fineFor, FINE_PER_DAY_PENCE, FINE_FREE_CARDS, FINE_CAP_PENCE };
