package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The grower statement report, one row per line of the printed sheet. */
public final class GrowerStatementReport implements Report {
    @Override
    public String title() {
        return "Grower statement";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
