package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The moisture trend report, one row per line of the printed sheet. */
public final class MoistureTrendReport implements Report {
    @Override
    public String title() {
        return "Moisture trend";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
