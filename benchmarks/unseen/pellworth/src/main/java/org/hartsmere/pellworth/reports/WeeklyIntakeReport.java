package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The weekly intake report, one row per line of the printed sheet. */
public final class WeeklyIntakeReport implements Report {
    @Override
    public String title() {
        return "Weekly intake";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
