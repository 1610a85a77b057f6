package org.hartsmere.pellworth.crops;

/** Barley as the weighbridge names it. */
public final class BarleyCrop implements Crop {
    private static final int BULK_DENSITY = 617;

    @Override
    public String name() {
        return "barley";
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
