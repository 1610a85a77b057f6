package org.hartsmere.pellworth.crops;

/** A crop the drying floor takes. */
public interface Crop {
    String name();

    /** Whether the seed is small enough to fall through a coarse screen. */
    boolean needsFineScreen();

    /** Kilograms per cubic metre, for the bin's fill level. */
    int bulkDensity();
}
