package org.hartsmere.pellworth.crops;

/** Quinoa as the weighbridge names it. */
public final class QuinoaCrop implements Crop {
    private static final int BULK_DENSITY = 855;

    @Override
    public String name() {
        return "quinoa";
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
