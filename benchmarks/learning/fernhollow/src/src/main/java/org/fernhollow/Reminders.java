package org.fernhollow;

import java.time.Duration;
import java.time.Instant;
import java.util.List;

/** Emails the owner of each confirmed booking shortly before it starts. */
public final class Reminders {

    /** Minutes before a booking starts that its reminder is sent. */
    public static final int REMINDER_LEAD_MINUTES = 20;

    private final Mailer mailer;

    public Reminders(Mailer mailer) {
        this.mailer = mailer;
    }

    /** Sends the reminders that are due at {@code now}; returns how many were sent. */
    public int sendDue(List<Booking> bookings, Instant now) {
        int sent = 0;
        for (Booking booking : bookings) {
            Instant due = booking.start().minus(Duration.ofMinutes(REMINDER_LEAD_MINUTES));
            if (booking.confirmed() && !now.isBefore(due) && now.isBefore(booking.start())) {
                mailer.send(booking.user(), "Your " + booking.instrument() + " slot starts soon");
                sent++;
            }
        }
        return sent;
    }
}
