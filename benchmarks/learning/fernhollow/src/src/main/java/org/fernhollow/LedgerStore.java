package org.fernhollow;

import java.time.Instant;
import java.util.List;

/** Keeps the bookings in PostgreSQL. */
public interface LedgerStore {

    /** The table the bookings are written to. */
    String TABLE = "ledger_entries";

    void insert(Booking booking);

    void delete(Booking booking);

    /** Bookings their owners have not confirmed yet, oldest first. */
    List<Booking> unconfirmed();

    /** How many bookings {@code user} holds in the week that contains {@code day}. */
    int countInWeek(String user, Instant day);
}
