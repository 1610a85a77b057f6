package org.hartsmere.pellworth;

import java.time.Instant;

/** A booked slot: a dryer, a load and when it starts. */
public record Slot(Dryer dryer, Load load, Instant start) {}
