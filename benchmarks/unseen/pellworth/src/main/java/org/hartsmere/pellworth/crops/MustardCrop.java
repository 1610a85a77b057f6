package org.hartsmere.pellworth.crops;

/** Mustard as the weighbridge names it. */
public final class MustardCrop implements Crop {
    private static final int BULK_DENSITY = 838;

    @Override
    public String name() {
        return "mustard";
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
