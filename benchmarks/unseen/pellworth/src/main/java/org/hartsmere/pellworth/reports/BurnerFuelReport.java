package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The burner fuel report, one row per line of the printed sheet. */
public final class BurnerFuelReport implements Report {
    @Override
    public String title() {
        return "Burner fuel";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
