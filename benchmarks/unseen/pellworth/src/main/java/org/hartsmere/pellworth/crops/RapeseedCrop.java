package org.hartsmere.pellworth.crops;

/** Rapeseed as the weighbridge names it. */
public final class RapeseedCrop implements Crop {
    private static final int BULK_DENSITY = 702;

    @Override
    public String name() {
        return "rapeseed";
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
