package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The fan hours report, one row per line of the printed sheet. */
public final class FanHoursReport implements Report {
    @Override
    public String title() {
        return "Fan hours";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
