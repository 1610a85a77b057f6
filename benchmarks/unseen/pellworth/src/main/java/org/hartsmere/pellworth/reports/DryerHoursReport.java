package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The dryer hours report, one row per line of the printed sheet. */
public final class DryerHoursReport implements Report {
    @Override
    public String title() {
        return "Dryer hours";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
