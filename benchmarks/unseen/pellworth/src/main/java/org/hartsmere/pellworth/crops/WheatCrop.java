package org.hartsmere.pellworth.crops;

/** Wheat as the weighbridge names it. */
public final class WheatCrop implements Crop {
    private static final int BULK_DENSITY = 600;

    @Override
    public String name() {
        return "wheat";
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
