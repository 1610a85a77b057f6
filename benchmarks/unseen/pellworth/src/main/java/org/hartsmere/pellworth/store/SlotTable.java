package org.hartsmere.pellworth.store;

import java.sql.Connection;
import java.sql.SQLException;

/** The `slots` table of the floor's database. */
public final class SlotTable {
    public static final String NAME = "slots";

    private final Connection db;

    public SlotTable(Connection db) {
        this.db = db;
    }

    public int count() throws SQLException {
        try (var rows = db.createStatement().executeQuery("SELECT count(*) FROM " + NAME)) {
            return rows.next() ? rows.getInt(1) : 0;
        }
    }
}
