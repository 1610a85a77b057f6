package org.hartsmere.pellworth.reports;

import java.time.LocalDate;
import java.util.List;

/** A printed report of the drying floor. */
public interface Report {
    String title();

    List<String> rows(LocalDate day);
}
