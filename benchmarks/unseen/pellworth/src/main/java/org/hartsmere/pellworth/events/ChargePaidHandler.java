package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "charge paid" event from the floor's controllers. */
public final class ChargePaidHandler implements Handler {
    private final EventLog log;

    public ChargePaidHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/chargePaid";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
