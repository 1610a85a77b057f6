package org.hartsmere.pellworth;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/** Gives each trailer at the weighbridge a slot on a dryer that takes its crop. */
public final class SlotScheduler {
    /** Length of one dryer slot, in minutes. */
    public static final int SLOT_MINUTES = 50;

    /** A trailer that has not reached the weighbridge this many minutes after its slot starts loses the slot. */
    public static final int NO_SHOW_MINUTES = 35;

    private final List<Dryer> dryers;
    private final SlotBook book;

    public SlotScheduler(List<Dryer> dryers, SlotBook book) {
        this.dryers = dryers;
        this.book = book;
    }

    /** Books the next free slot for a load on a dryer that takes its crop, or none when every dryer is full today. */
    public Optional<Slot> assignSlot(Load load, Instant now) {
        for (Dryer dryer : dryers) {
            if (!dryer.takes(load.crop())) {
                continue;
            }
            Optional<Instant> start = book.nextFree(dryer, now, Duration.ofMinutes(SLOT_MINUTES));
            if (start.isPresent()) {
                return Optional.of(book.hold(dryer, load, start.get()));
            }
        }
        return Optional.empty();
    }

    /** Frees the slots whose trailers did not arrive in time. */
    public int releaseNoShows(Instant now) {
        return book.releaseOlderThan(now.minus(Duration.ofMinutes(NO_SHOW_MINUTES)));
    }
}
