package org.hartsmere.pellworth.crops;

/** Lupins as the weighbridge names it. */
public final class LupinsCrop implements Crop {
    private static final int BULK_DENSITY = 821;

    @Override
    public String name() {
        return "lupins";
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
