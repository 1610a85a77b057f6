package org.hartsmere.pellworth.crops;

/** Oats as the weighbridge names it. */
public final class OatsCrop implements Crop {
    private static final int BULK_DENSITY = 634;

    @Override
    public String name() {
        return "oats";
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
