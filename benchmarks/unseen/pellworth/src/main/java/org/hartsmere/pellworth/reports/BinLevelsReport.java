package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The bin levels report, one row per line of the printed sheet. */
public final class BinLevelsReport implements Report {
    @Override
    public String title() {
        return "Bin levels";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
