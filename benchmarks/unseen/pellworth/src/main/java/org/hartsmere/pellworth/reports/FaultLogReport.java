package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The fault log report, one row per line of the printed sheet. */
public final class FaultLogReport implements Report {
    @Override
    public String title() {
        return "Fault log";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
