package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "grower added" event from the floor's controllers. */
public final class GrowerAddedHandler implements Handler {
    private final EventLog log;

    public GrowerAddedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/growerAdded";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
