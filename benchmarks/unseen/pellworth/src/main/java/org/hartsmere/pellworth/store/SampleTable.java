package org.hartsmere.pellworth.store;

import java.sql.Connection;
import java.sql.SQLException;

/** The `samples` table of the floor's database. */
public final class SampleTable {
    public static final String NAME = "samples";

    private final Connection db;

    public SampleTable(Connection db) {
        this.db = db;
    }

    public int count() throws SQLException {
        try (var rows = db.createStatement().executeQuery("SELECT count(*) FROM " + NAME)) {
            return rows.next() ? rows.getInt(1) : 0;
        }
    }
}
