package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The charges report, one row per line of the printed sheet. */
public final class ChargesReport implements Report {
    @Override
    public String title() {
        return "Charges";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
