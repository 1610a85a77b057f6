package org.hartsmere.pellworth.crops;

/** Peas as the weighbridge names it. */
public final class PeasCrop implements Crop {
    private static final int BULK_DENSITY = 753;

    @Override
    public String name() {
        return "peas";
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
