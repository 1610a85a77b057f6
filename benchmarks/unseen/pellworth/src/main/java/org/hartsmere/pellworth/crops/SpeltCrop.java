package org.hartsmere.pellworth.crops;

/** Spelt as the weighbridge names it. */
public final class SpeltCrop implements Crop {
    private static final int BULK_DENSITY = 770;

    @Override
    public String name() {
        return "spelt";
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
