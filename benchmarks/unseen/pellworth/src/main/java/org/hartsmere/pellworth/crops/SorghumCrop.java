package org.hartsmere.pellworth.crops;

/** Sorghum as the weighbridge names it. */
public final class SorghumCrop implements Crop {
    private static final int BULK_DENSITY = 804;

    @Override
    public String name() {
        return "sorghum";
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
