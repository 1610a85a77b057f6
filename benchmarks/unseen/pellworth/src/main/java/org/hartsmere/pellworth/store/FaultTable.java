package org.hartsmere.pellworth.store;

import java.sql.Connection;
import java.sql.SQLException;

/** The `faults` table of the floor's database. */
public final class FaultTable {
    public static final String NAME = "faults";

    private final Connection db;

    public FaultTable(Connection db) {
        this.db = db;
    }

    public int count() throws SQLException {
        try (var rows = db.createStatement().executeQuery("SELECT count(*) FROM " + NAME)) {
            return rows.next() ? rows.getInt(1) : 0;
        }
    }
}
