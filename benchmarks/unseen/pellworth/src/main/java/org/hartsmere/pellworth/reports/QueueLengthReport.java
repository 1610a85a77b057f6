package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The queue length report, one row per line of the printed sheet. */
public final class QueueLengthReport implements Report {
    @Override
    public String title() {
        return "Queue length";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
