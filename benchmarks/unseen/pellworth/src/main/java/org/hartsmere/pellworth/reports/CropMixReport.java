package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** The crop mix report, one row per line of the printed sheet. */
public final class CropMixReport implements Report {
    @Override
    public String title() {
        return "Crop mix";
    }

    @Override
    public List<String> rows(LocalDate day) {
        return List.of(title() + " for " + day);
    }
}
