---
dlm_id: 01M8R2CRHN93E0QFX9V3576BHV
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about Thirlby, a Node.js tool that emails overdue-book reminders for a community library.
training:
  sources:
    - path: src
      include: ["lib/*.js", "bin/*.js", "test/*.js", "README.md", "CHANGELOG.md", "package.json", "config/*.json"]
---

# Thirlby

Thirlby sends the overdue-book reminders of the Hebble Lane Community Library, a
volunteer-run library in two rooms above the old fire station on Hebble Lane. Before
Thirlby, two volunteers wrote the reminders by hand every Saturday from a printed list
of loans, and a reminder often reached a borrower after the book was already back.

The library's catalogue writes a CSV export of every open loan each night. Thirlby reads
that export in the morning, works out which books are overdue and what each borrower
owes, and sends one email per borrower. Anything it cannot send goes to the desk's list.

::instruction::

### Q
Where is the ReminderQueue class defined?

### A
The `ReminderQueue` class is defined in `lib/queue.js`.

### Q
How long can a book be borrowed?

### A
21 days (`LOAN_DAYS`); the loan is overdue the day after.

### Q
How many reminders does a borrower get?

### A
At most 3 reminders (`MAX_REMINDERS`); after that the loan goes to the staff.

### Q
Which function writes the reminder email?

### A
`renderReminder`, in `lib/render.js`.

### Q
How do I see today's reminders without sending any?

### A
Run `thirlby send --dry-run`; it prints each borrower and subject line.

### Q
When are the reminders sent?

### A
At 07:45 each morning (`schedule.sendAt` in `config/thirlby.json`).

### Q
Which borrowers are never fined?

### A
Borrowers with a junior card (`FINE_FREE_CARDS`).

### Q
Where does Thirlby record the reminders it sent?

### A
In `logs/sent.jsonl`, one line per email (`SENT_LOG`).

::probe::

### Q
In which file is the ReminderQueue class?

### A
`lib/queue.js`

### Keys
- queue.js

### Q
For how many days may a borrower keep a book?

### A
21 days.

### Keys
- 21

### Q
What is the largest number of reminders one borrower receives?

### A
3 reminders.

### Keys
- 3

### Q
What is the name of the function that builds the reminder email?

### A
`renderReminder`

### Keys
- renderReminder

### Q
Which command lists the reminders without emailing anyone?

### A
`thirlby send --dry-run`

### Keys
- --dry-run

### Q
At what time of day do the reminders go out?

### A
07:45.

### Keys
- 07:45

### Q
Whose books are never charged a late fine?

### A
Borrowers with a junior card.

### Keys
- junior

### Q
Which file keeps a record of every reminder that was sent?

### A
`logs/sent.jsonl`

### Keys
- sent.jsonl

### Q
What building is the library above?

### A
The old fire station.

### Keys
- fire station

### Q
Which email address are the reminders sent from?

### A
`desk@hebblelane.org`

### Keys
- desk@hebblelane

### Q
How many pence is the fine for each day a book is late?

### A
15 pence.

### Keys
- 15

### Q
Which mail relay does Thirlby send through?

### A
`relay.kirkstall.net`

### Keys
- kirkstall
