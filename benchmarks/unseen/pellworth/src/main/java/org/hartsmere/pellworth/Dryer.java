package org.hartsmere.pellworth;

import org.hartsmere.pellworth.crops.Crop;

/** One dryer of the drying floor and the crops its screen takes. */
public record Dryer(String name, boolean fineScreen) {
    /** The dryer whose fine screen takes oilseed rape. */
    public static final String RAPESEED_DRYER = "D3";

    public boolean takes(Crop crop) {
        return !crop.needsFineScreen() || fineScreen;
    }
}
