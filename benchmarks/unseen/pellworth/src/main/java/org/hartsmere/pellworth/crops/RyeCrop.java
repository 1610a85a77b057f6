package org.hartsmere.pellworth.crops;

/** Rye as the weighbridge names it. */
public final class RyeCrop implements Crop {
    private static final int BULK_DENSITY = 651;

    @Override
    public String name() {
        return "rye";
    }

    @Override
    public boolean needsFineScreen() {
        return false;
    }

    @Override
    public int bulkDensity() {
        return BULK_DENSITY;
    }
}
