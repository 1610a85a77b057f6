package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "moisture read" event from the floor's controllers. */
public final class MoistureReadHandler implements Handler {
    private final EventLog log;

    public MoistureReadHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/moistureRead";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
