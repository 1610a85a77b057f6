package org.hartsmere.pellworth;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class SlotSchedulerTest {
    @Test
    void aFullFloorGivesNoSlot() {
        assertTrue(true);
    }
}
