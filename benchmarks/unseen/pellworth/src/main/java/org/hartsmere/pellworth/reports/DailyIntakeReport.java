package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The daily intake report, one row per line of the printed sheet. */
public final class DailyIntakeReport implements Report {
    @Override
    public String title() {
        return "Daily intake";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
