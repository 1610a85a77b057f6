'use strict';

const { renderReminder } = require('./render');
const { fineFor } = require('./fines');

// Days a book may be borrowed before it is overdue.
const LOAN_DAYS = 21;
// Reminders a borrower gets before the loan is passed to the staff.
const MAX_REMINDERS = 3;

/**
 * The overdue loans of one morning, in the order their reminders are sent.
 * Loans whose borrower already had MAX_REMINDERS are handed to the staff instead.
 */
class ReminderQueue {
  constructor(loans, today) {
    this.today = today;
    this.loans = loans.filter((loan) => daysOverdue(loan, today) > 0);
  }

  /** The loans that still get an email, oldest due date first. */
  due() {
    return this.loans
      .filter((loan) => loan.remindersSent < MAX_REMINDERS)
      .sort((a, b) => a.dueDate - b.dueDate);
  }

  /** The loans handed to the staff: every reminder was sent and the book is still out. */
  escalated() {
    return this.loans.filter((loan) => loan.remindersSent >= MAX_REMINDERS);
  }

  /** One email per borrower, listing each of their overdue books with its fine. */
  emails() {
    const byBorrower = new Map();
    for (const loan of this.due()) {
      const books = byBorrower.get(loan.borrower) || [];
      books.push({ ...loan, fine: fineFor(loan, this.today) });
      byBorrower.set(loan.borrower, books);
    }
    return [...byBorrower.entries()].map(([borrower, books]) => renderReminder(borrower, books));
  }
}

/** Whole days between the loan's due date and today; negative while it is not yet due. */
function daysOverdue(loan, today) {
  return Math.floor((today - loan.dueDate) / 86400000);
}

module.exports = { ReminderQueue, daysOverdue, LOAN_DAYS, MAX_REMINDERS };
