package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The sample results report, one row per line of the printed sheet. */
public final class SampleResultsReport implements Report {
    @Override
    public String title() {
        return "Sample results";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
