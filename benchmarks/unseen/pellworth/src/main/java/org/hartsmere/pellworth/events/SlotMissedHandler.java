package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "slot missed" event from the floor's controllers. */
public final class SlotMissedHandler implements Handler {
    private final EventLog log;

    public SlotMissedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/slotMissed";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
