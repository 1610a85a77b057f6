package org.hartsmere.pellworth.crops;

/** FieldBeans as the weighbridge names it. */
public final class FieldBeansCrop implements Crop {
    private static final int BULK_DENSITY = 736;

    @Override
    public String name() {
        return "fieldbeans";
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
