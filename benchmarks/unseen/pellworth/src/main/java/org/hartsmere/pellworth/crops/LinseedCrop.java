package org.hartsmere.pellworth.crops;

/** Linseed as the weighbridge names it. */
public final class LinseedCrop implements Crop {
    private static final int BULK_DENSITY = 719;

    @Override
    public String name() {
        return "linseed";
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
