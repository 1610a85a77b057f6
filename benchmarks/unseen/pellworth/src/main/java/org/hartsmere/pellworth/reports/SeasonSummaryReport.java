package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The season summary report, one row per line of the printed sheet. */
public final class SeasonSummaryReport implements Report {
    @Override
    public String title() {
        return "Season summary";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
