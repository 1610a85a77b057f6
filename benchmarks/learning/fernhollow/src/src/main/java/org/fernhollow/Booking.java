package org.fernhollow;

import java.time.Instant;

/** One person's hold on one instrument for one slot. */
public record Booking(String user, Instrument instrument, Instant start, Instant end, Instant madeAt, boolean confirmed) {

    /** The same booking, confirmed by its owner. */
    public Booking confirm() {
        return new Booking(user, instrument, start, end, madeAt, true);
    }
}

/** The microscopes that can be booked. */
enum Instrument {
    CONFOCAL,
    WIDEFIELD,
    LIGHTSHEET
}
