package org.hartsmere.pellworth.crops;

/** Millet as the weighbridge names it. */
public final class MilletCrop implements Crop {
    private static final int BULK_DENSITY = 787;

    @Override
    public String name() {
        return "millet";
    }

    @Override
    public boolean needsFineScreen() {
        return true;
    }

    @Override
    public int bulkDensity() {
        return BULK_DENSITY;
    }
}
