package org.hartsmere.pellworth;

import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/** The day's slots of every dryer. */
public interface SlotBook {
    Optional<Instant> nextFree(Dryer dryer, Instant after, Duration length);

    Slot hold(Dryer dryer, Load load, Instant start);

    int releaseOlderThan(Instant cutoff);
}
