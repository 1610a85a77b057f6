package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The trailer times report, one row per line of the printed sheet. */
public final class TrailerTimesReport implements Report {
    @Override
    public String title() {
        return "Trailer times";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
