package org.hartsmere.pellworth.crops;

/** Triticale as the weighbridge names it. */
public final class TriticaleCrop implements Crop {
    private static final int BULK_DENSITY = 668;

    @Override
    public String name() {
        return "triticale";
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
