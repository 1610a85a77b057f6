package org.hartsmere.pellworth.crops;

/** Maize as the weighbridge names it. */
public final class MaizeCrop implements Crop {
    private static final int BULK_DENSITY = 685;

    @Override
    public String name() {
        return "maize";
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
