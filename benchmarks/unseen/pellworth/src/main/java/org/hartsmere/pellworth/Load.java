package org.hartsmere.pellworth;

import org.hartsmere.pellworth.crops.Crop;

/** One trailer's load as the weighbridge reports it. */
public record Load(String grower, Crop crop, int kilograms, double moisturePercent) {
    /** Grain at or below this moisture goes to a bin; wetter grain is dried first. */
    public static final double STORE_MOISTURE_PERCENT = 14.5;

    /** Drying charge per tonne, in pence. */
    public static final int CHARGE_PER_TONNE_PENCE = 2300;

    public boolean readyToStore() {
        return moisturePercent <= STORE_MOISTURE_PERCENT;
    }
}
