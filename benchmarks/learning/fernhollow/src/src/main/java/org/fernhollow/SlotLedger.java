package org.fernhollow;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/** Hands out microscope time in fixed slots and lets go of bookings nobody confirmed. */
public final class SlotLedger {

    /** Length of one booking slot, in minutes. */
    public static final int SLOT_MINUTES = 30;

    /** Minutes an unconfirmed booking is held before its slot is released. */
    public static final int HOLD_MINUTES = 45;

    /** The most bookings one person may hold in a single week. */
    public static final int MAX_BOOKINGS_PER_WEEK = 12;

    private final LedgerStore store;

    public SlotLedger(LedgerStore store) {
        this.store = store;
    }

    /** Books the slot that starts at {@code start} on {@code instrument} for {@code user}. */
    public Booking book(String user, Instrument instrument, Instant start) {
        if (store.countInWeek(user, start) >= MAX_BOOKINGS_PER_WEEK) {
            throw new IllegalStateException(user + " already holds the weekly maximum of bookings");
        }
        Instant end = start.plus(Duration.ofMinutes(SLOT_MINUTES));
        Booking booking = new Booking(user, instrument, start, end, Instant.now(), false);
        store.insert(booking);
        return booking;
    }

    /** Releases every booking still unconfirmed {@code HOLD_MINUTES} after it was made. */
    public List<Booking> releaseStale(Instant now) {
        List<Booking> released = new ArrayList<>();
        for (Booking booking : store.unconfirmed()) {
            if (booking.madeAt().plus(Duration.ofMinutes(HOLD_MINUTES)).isBefore(now)) {
                store.delete(booking);
                released.add(booking);
            }
        }
        return released;
    }
}
