package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The no shows report, one row per line of the printed sheet. */
public final class NoShowsReport implements Report {
    @Override
    public String title() {
        return "No shows";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
